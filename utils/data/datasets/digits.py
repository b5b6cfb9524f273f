"""scikit-learn's handwritten digits: 1,797 real 8x8 grey images that ship offline."""

from __future__ import annotations

from typing import Callable, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from utils.errors import ConfigError
from utils.registry import DATASETS

SPLITS = ("train", "val", "test")


def split_indices(labels: np.ndarray, val_fraction: float, test_fraction: float, seed: int) -> dict:
    """A stratified, seed-determined train/val/test split of ``range(len(labels))``."""
    from sklearn.model_selection import train_test_split

    idx = np.arange(len(labels))
    rest, test = train_test_split(idx, test_size=test_fraction, stratify=labels, random_state=seed)
    val_of_rest = val_fraction / (1.0 - test_fraction)
    train, val = train_test_split(rest, test_size=val_of_rest, stratify=labels[rest], random_state=seed)
    return {"train": np.sort(train), "val": np.sort(val), "test": np.sort(test)}


@DATASETS.register("digits")
class Digits(Dataset):
    """Digits as float tensors ``[1, size, size]`` in [0, 1] with integer labels 0-9.

    ``classes`` keeps only those digits, relabelled 0..len(classes)-1 in the
    given order (a smaller task, e.g. for fine-tuning); the split is unchanged.
    """

    num_classes = 10

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        size: int = 8,
        val_fraction: float = 0.1,
        test_fraction: float = 0.2,
        split_seed: int = 0,
        classes: Optional[Sequence[int]] = None,
    ) -> None:
        from sklearn.datasets import load_digits

        if split not in SPLITS:
            raise ConfigError(f"digits has splits {SPLITS}, got '{split}'")
        data = load_digits()
        idx = split_indices(data.target, val_fraction, test_fraction, split_seed)[split]
        labels = data.target[idx]
        if classes is not None:
            if not classes or len(set(classes)) != len(classes) or not set(classes) <= set(range(10)):
                raise ConfigError(f"digits: data.args.classes must be distinct digits 0-9, got {list(classes)}")
            keep = np.isin(labels, list(classes))
            idx = idx[keep]
            labels = np.array([list(classes).index(d) for d in data.target[idx]], dtype=np.int64)
        images = torch.from_numpy(data.images[idx]).float().div_(16.0).unsqueeze(1)
        if size != 8:
            images = F.interpolate(images, size=(size, size), mode="bilinear", align_corners=False)
        self.images = images
        self.labels = torch.from_numpy(labels).long()
        self.classes = [str(digit) for digit in (classes if classes is not None else range(10))]  # label i shows digit classes[i]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
        image = self.images[index]
        if self.transform is not None:
            image = self.transform(image)
        return image, self.labels[index]
