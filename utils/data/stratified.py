"""A stratified, seeded train/test split of sample indices, without importing scikit-learn.

It draws exactly what ``sklearn.model_selection.train_test_split(idx, test_size=f,
stratify=labels, random_state=seed)`` draws (its ``StratifiedShuffleSplit``: the same
``RandomState`` calls in the same order), so the digits splits stay what they have always
been. Importing scikit-learn's model selection pulls in scipy, about 2.5 s of every
process's start; tests/data/test_stratified.py compares both on many splits.
"""

from __future__ import annotations

import logging
import math
from typing import Tuple

import numpy as np

log = logging.getLogger(__name__)


def _approximate_mode(class_counts: np.ndarray, n_draws: int, rng: np.random.RandomState) -> np.ndarray:
    """Samples per class for ``n_draws`` draws: the floored proportional share, the rest
    given to the largest remainders, ties broken at random."""
    continuous = class_counts / class_counts.sum() * n_draws
    floored = np.floor(continuous)
    need_to_add = int(n_draws - floored.sum())
    if need_to_add > 0:
        remainder = continuous - floored
        for value in np.sort(np.unique(remainder))[::-1]:
            (inds,) = np.where(remainder == value)
            add_now = min(len(inds), need_to_add)
            floored[rng.choice(inds, size=add_now, replace=False)] += 1
            need_to_add -= add_now
            if need_to_add == 0:
                break
    return floored.astype(int)


def stratified_split(
    labels: np.ndarray, test_fraction: float, seed: int, what: str = "the split"
) -> Tuple[np.ndarray, np.ndarray]:
    """Positions into ``labels`` of the train and the test part, in train_test_split's (shuffled)
    order: a split of one part depends on the order of its labels.

    A part too small to hold every class (a 2-sample smoke-test split), or a class with a single
    sample, cannot be stratified: then both parts are drawn at random (seeded) and a warning
    names ``what``. Either part empty is a ValueError: the caller checks its fractions first."""
    n_samples = len(labels)
    n_test = math.ceil(test_fraction * n_samples)
    n_train = n_samples - n_test
    if min(n_train, n_test) < 1:
        raise ValueError(f"a split of {n_samples} samples into {n_train} + {n_test} leaves a part empty")
    classes, y_indices, class_counts = np.unique(labels, return_inverse=True, return_counts=True)
    if class_counts.min() < 2 or min(n_train, n_test) < len(classes):
        log.warning(
            "%s: %d + %d of %d samples cannot hold each of the %d classes in both parts; drawn at random, without "
            "stratification (some classes are missing from a part)",
            what,
            n_train,
            n_test,
            n_samples,
            len(classes),
        )
        order = np.random.RandomState(seed).permutation(n_samples).astype(np.int64)
        return order[n_test:], order[:n_test]
    class_indices = np.split(np.argsort(y_indices, kind="stable"), np.cumsum(class_counts)[:-1])
    rng = np.random.RandomState(seed)
    n_i = _approximate_mode(class_counts, n_train, rng)
    t_i = _approximate_mode(class_counts - n_i, n_test, rng)
    train, test = [], []
    for i in range(len(classes)):
        shuffled = class_indices[i].take(rng.permutation(class_counts[i]), mode="clip")
        train.extend(shuffled[: n_i[i]])
        test.extend(shuffled[n_i[i] : n_i[i] + t_i[i]])
    return rng.permutation(train).astype(np.int64), rng.permutation(test).astype(np.int64)
