"""One small image-folder checkpoint shared by the tests of extra metrics, predict and export."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import numpy as np
import pytest

SPLITS = {"train": 30, "val": 12, "test": 2}  # images per split (the test split: 2, rank 2 of 3 gets none)
CLASSES = ("zero", "one", "two")


def make_digit_folder(root: Path, sizes: Dict[str, int] = SPLITS) -> Path:
    """``root/<split>/<class>/<n>.png``: 8x8 grey digits 0-2 from scikit-learn, classes in turn."""
    from PIL import Image

    from utils.data.datasets.digits import load_digits

    images, labels = load_digits()
    keep = [i for i in range(len(labels)) if labels[i] < len(CLASSES)]
    at = 0
    for split, count in sizes.items():
        for n in range(count):
            i = keep[at]
            at += 1
            folder = root / split / CLASSES[labels[i]]
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray((images[i] * 15.9).astype(np.uint8), mode="L").save(folder / f"{split}_{n:03d}.png")
    return root


def folder_overrides(out_root: Path, data_root: Path) -> list:
    return [
        f"experiment.output_root={out_root}",
        "experiment.name=apps",
        "threads=1",
        "data.name=image_folder",
        f"data.root={data_root}",
        "data.args={channels: 1}",
        "data.batch_size=8",
        "model.input_size=[1, 8, 8]",
        "model.args={backbone: small_cnn, num_classes: 3, backbone_args: {in_channels: 1, widths: [8, 16]}}",
        "train.epochs=6",
    ]


@pytest.fixture(scope="session")
def trained(tmp_path_factory) -> Dict[str, Path]:
    """A checkpoint trained briefly on the digit folder: {checkpoint, data, out}."""
    import main

    base = tmp_path_factory.mktemp("apps")
    data, out = make_digit_folder(base / "data"), base / "output"
    assert main.main(folder_overrides(out, data)) == 0
    return {"checkpoint": out / "apps" / "run_001" / "checkpoints" / "best.pt", "data": data, "out": out}
