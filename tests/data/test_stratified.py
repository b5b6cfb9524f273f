"""The digits split and images, read without scikit-learn, are exactly scikit-learn's."""

from __future__ import annotations

import numpy as np
import pytest

from utils.data.datasets.digits import load_digits, split_indices
from utils.data.stratified import stratified_split


def test_the_digits_file_reads_as_scikit_learns_load_digits():
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    images, labels = load_digits()
    reference = sklearn_datasets.load_digits()
    assert np.array_equal(images, reference.images) and images.dtype == reference.images.dtype
    assert np.array_equal(labels, reference.target)


@pytest.mark.parametrize("seed", [0, 1, 7, 12345])
@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.111, 0.35])
def test_stratified_split_draws_what_train_test_split_draws(seed, fraction):
    model_selection = pytest.importorskip("sklearn.model_selection")
    rng = np.random.RandomState(seed + 1)
    # uneven classes: ties in the remainders
    for labels in (
        load_digits()[1],
        rng.randint(0, 7, size=203),
        np.repeat([3, 1, 2], [5, 40, 11]),
    ):
        idx = np.arange(len(labels))
        train, test = model_selection.train_test_split(idx, test_size=fraction, stratify=labels, random_state=seed)
        ours = stratified_split(labels, fraction, seed)
        # the order too: it decides a further split
        assert np.array_equal(ours[0], train) and np.array_equal(ours[1], test)


@pytest.mark.parametrize("seed", [0, 3])
def test_the_digits_splits_are_scikit_learns_two_nested_splits(seed):
    model_selection = pytest.importorskip("sklearn.model_selection")
    labels = load_digits()[1]
    rest, test = model_selection.train_test_split(
        np.arange(len(labels)), test_size=0.2, stratify=labels, random_state=seed
    )
    train, val = model_selection.train_test_split(rest, test_size=0.1 / 0.8, stratify=labels[rest], random_state=seed)
    splits = split_indices(labels, 0.1, 0.2, seed)
    for name, reference in (("train", train), ("val", val), ("test", test)):
        assert np.array_equal(splits[name], np.sort(reference)), name
    together = np.concatenate(list(splits.values()))
    assert len(together) == 1797 == len(set(together.tolist()))
    assert [len(splits[s]) for s in ("train", "val", "test")] == [1257, 180, 360]
