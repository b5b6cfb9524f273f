"""A crop from data.*_transforms larger than the image it gets is one DataError naming both
sizes and the fix, for image_folder, image/mask pairs and every crop kind; crops that fit
are unchanged."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.errors import DataError


def folder(root: Path, size=(6, 10)) -> Path:
    """image_folder and image_mask_folder layouts of one 6x10 (height x width) image per split."""
    for split in ("train", "val", "test"):
        for sub in ("a", "Image", "Mask"):
            (root / split / sub).mkdir(parents=True)
            Image.fromarray(np.full(size, 200, np.uint8)).save(root / split / sub / "0.png")
    return root


@pytest.mark.parametrize(
    "split, key, spec",
    [
        ("train", "data.train_transforms", {"name": "RandomCrop", "size": 8}),
        ("train", "data.train_transforms", {"name": "FiveCrop", "size": [4, 12]}),
        ("test", "data.eval_transforms", {"name": "CenterCrop", "size": [7, 4]}),  # v2 would pad it with black
    ],
)
def test_a_crop_larger_than_the_image_names_both_sizes_and_the_fix(tmp_path, split, key, spec):
    cfg = DataConfig(name="image_folder", root=str(folder(tmp_path)), train_transforms=[spec], eval_transforms=[spec])
    size = spec["size"] if isinstance(spec["size"], list) else [spec["size"]] * 2
    with pytest.raises(
        DataError,
        match=rf"{key}: a crop of {size[1]}x{size[0]} is larger than the image it gets, 10x6 \(width x height\); put a Resize before it",
    ):
        build_dataset(cfg, split)[0]


def test_image_mask_pairs_get_the_same_error_and_crops_that_fit_work(tmp_path):
    root = folder(tmp_path)
    pairs = DataConfig(
        name="image_mask_folder",
        root=str(root),
        args={"size": None},
        train_transforms=[{"name": "RandomCrop", "size": [4, 12]}],
    )
    with pytest.raises(
        DataError, match=r"data.train_transforms: a crop of 12x4 is larger than the image it gets, 10x6"
    ):
        build_dataset(pairs, "train")[0]
    fits = DataConfig(
        name="image_folder",
        root=str(root),
        train_transforms=[{"name": "RandomCrop", "size": 6}],
        eval_transforms=[{"name": "CenterCrop", "size": 4}],
    )
    assert build_dataset(fits, "train")[0][0].shape == (3, 6, 6)
    image = build_dataset(fits, "test")[0][0]
    assert image.shape == (3, 4, 4) and torch.allclose(image, torch.full_like(image, 200 / 255))
