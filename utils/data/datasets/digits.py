"""scikit-learn's handwritten digits: 1,797 real 8x8 grey images that ship offline."""

from __future__ import annotations

import functools
import importlib.util
import math
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from utils.config.arguments import Count, Fraction, Seed
from utils.data.stratified import stratified_split
from utils.errors import ConfigError
from utils.registry import DATASETS

SPLITS = ("train", "val", "test")


def split_indices(labels: np.ndarray, val_fraction: float, test_fraction: float, seed: int) -> dict:
    """A stratified, seed-determined train/val/test split of ``range(len(labels))`` (a split too small
    to hold every class is drawn at random, with a warning naming it)."""
    n_test = math.ceil(test_fraction * len(labels))  # the sizes stratified_split draws (it rounds each part up)
    n_train = len(labels) - n_test - math.ceil(val_fraction / (1.0 - test_fraction) * (len(labels) - n_test))
    if n_train < 1:
        raise ConfigError(
            f"digits: data.args.val_fraction={val_fraction:g} and data.args.test_fraction={test_fraction:g} leave no training "
            f"samples of the {len(labels)}; make their sum smaller (e.g. 0.1 and 0.2)"
        )
    rest, test = stratified_split(
        labels, test_fraction, seed, f"digits: the test split (data.args.test_fraction={test_fraction:g})"
    )
    val_what = f"digits: the val split (data.args.val_fraction={val_fraction:g})"
    train, val = stratified_split(labels[rest], val_fraction / (1.0 - test_fraction), seed, val_what)
    return {"train": np.sort(rest[train]), "val": np.sort(rest[val]), "test": np.sort(test)}


@functools.lru_cache(maxsize=4)
def _digits_split(val_fraction: float, test_fraction: float, seed: int) -> dict:
    """``split_indices`` of the digits, drawn once for the three splits (and its warnings said once)."""
    return split_indices(load_digits()[1], val_fraction, test_fraction, seed)


@functools.lru_cache(maxsize=1)
def load_digits() -> Tuple[np.ndarray, np.ndarray]:
    """The images ``[1797, 8, 8]`` (values 0-16) and labels of scikit-learn's digits, read from the
    file scikit-learn ships, as its ``load_digits`` reads it, without importing scikit-learn (see
    utils/data/stratified.py)."""
    spec = importlib.util.find_spec("sklearn")  # finds the package without running it
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            "the digits dataset ships with scikit-learn, which is not installed: pip install scikit-learn"
        )
    data = np.loadtxt(Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz", delimiter=",")
    return data[:, :-1].reshape(-1, 8, 8), data[:, -1].astype(int)


@DATASETS.register("digits")
class Digits(Dataset):
    """Digits as float tensors ``[1, size, size]`` in [0, 1] with integer labels 0-9.

    ``classes`` keeps only those digits, relabelled 0..len(classes)-1 in the
    given order (a smaller task, e.g. for fine-tuning); the split is unchanged.
    """

    SIZING = ("size", "first")  # --mode predict: resized to data.args.size before the eval transforms

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        size: Count = 8,
        val_fraction: Fraction = 0.1,
        test_fraction: Fraction = 0.2,
        split_seed: Seed = 0,
        classes: Optional[Sequence[int]] = None,
    ) -> None:
        if split not in SPLITS:
            raise ConfigError(f"digits has splits {SPLITS}, got '{split}'")
        all_images, all_labels = load_digits()
        idx = _digits_split(val_fraction, test_fraction, split_seed)[split]
        labels = all_labels[idx]
        if classes is not None:
            if not classes or len(set(classes)) != len(classes) or not set(classes) <= set(range(10)):
                raise ConfigError(f"digits: data.args.classes must be distinct digits 0-9, got {list(classes)}")
            keep = np.isin(labels, list(classes))
            idx = idx[keep]
            labels = np.array([list(classes).index(d) for d in all_labels[idx]], dtype=np.int64)
        images = torch.from_numpy(all_images[idx]).float().div_(16.0).unsqueeze(1)
        if size != 8:
            images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
        # what the classes argument takes; label i is digit classes[i]
        self.classes = list(classes) if classes is not None else list(range(10))
        self.num_classes = len(self.classes)
        self.images = images
        self.labels = torch.from_numpy(labels).long()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[index]
