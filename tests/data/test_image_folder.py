"""image_folder: one class list for every split (saved in checkpoints, used by test mode), symlink
loops, decompression bombs and truncated files under on_bad_sample=skip."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Dict, Sequence

import numpy as np
import pytest
from PIL import Image

import main
from tests.fixtures.metrics_rows import rows
from utils.checkpoint.state import Checkpoint
from utils.config.load import load_config
from utils.data import build_dataset
from utils.errors import DataError

SHADES = {"a": 0, "b": 128, "c": 255}  # what brightness_classifier reads as classes 0, 1, 2


def write_images(folder: Path, shade: int, count: int = 4, size: Sequence[int] = (8, 8)) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.fromarray(np.full((*size, 3), shade, dtype=np.uint8)).save(folder / f"{i}.png")


def tree(root: Path, splits: Dict[str, Sequence[str]]) -> Path:
    for split, classes in splits.items():
        for name in classes:
            write_images(root / split / name, SHADES[name])
    return root


def data_config(root: Path, *extra: str):
    return load_config(None, ["data.name=image_folder", f"data.root={root}", "model.input_size=[3,8,8]", *extra]).data


def test_a_split_without_a_class_keeps_the_train_split_labels(tmp_path):
    root = tree(tmp_path, {"train": "abc", "val": "ac"})
    cfg = data_config(root)
    train = build_dataset(cfg, "train")
    val = build_dataset(cfg, "val", train.classes)
    assert train.classes == val.classes == ["a", "b", "c"]
    assert sorted(set(val.labels.tolist())) == [0, 2]  # c stays 2
    assert set(build_dataset(cfg, "val").labels.tolist()) == {0, 2}  # also on its own: from root/train


def test_a_class_folder_that_train_lacks_is_an_error_naming_it(tmp_path):
    root = tree(tmp_path, {"train": "ab", "val": "abc"})
    with pytest.raises(
        DataError, match=r"class folder\(s\) \['c'\] in '.*val' are not classes of the training split \(a, b\)"
    ):
        build_dataset(data_config(root), "val", ["a", "b"])


def test_symlinked_folders_are_read_once_and_never_loop(tmp_path):
    root = tree(tmp_path / "data", {"train": "ab"})
    write_images(tmp_path / "elsewhere", 0, count=3)
    os.symlink("../a", root / "train" / "a" / "again")  # a loop: a/again/again/... is a again
    os.symlink(tmp_path / "elsewhere", root / "train" / "a" / "more")  # a real folder reached by a link: read once
    os.symlink(tmp_path / "elsewhere", root / "train" / "a" / "same")
    assert len(build_dataset(data_config(root), "train")) == 4 + 3 + 4


def _png_header(width: int, height: int) -> bytes:
    """A PNG that declares ``width`` x ``height`` pixels (PIL checks the size when it opens the file)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def bad_files(folder: Path) -> None:
    (folder / "bomb.png").write_bytes(_png_header(14000, 14000))  # 196 megapixels: DecompressionBombError
    (folder / "large.png").write_bytes(_png_header(10000, 10000))  # 100 megapixels: DecompressionBombWarning
    noise = np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise).save(folder / "truncated.png")
    data = (folder / "truncated.png").read_bytes()
    (folder / "truncated.png").write_bytes(data[: len(data) * 6 // 10])  # cut inside the pixel data


def test_skip_covers_decompression_bombs_and_truncated_images(tmp_path, caplog):
    root = tree(tmp_path, {"train": "abc", "val": "abc"})
    bad_files(root / "train" / "a")
    dataset = build_dataset(data_config(root, "data.args={on_bad_sample: skip}"), "train")
    images = [dataset[i][0] for i in range(len(dataset))]
    assert len(images) == 15 and len(dataset.bad_samples.bad) == 3
    for name, error in (
        ("bomb.png", "DecompressionBombError"),
        ("large.png", "DecompressionBombWarning"),
        ("truncated.png", "OSError"),
    ):
        assert f"skipping unreadable image '{root / 'train' / 'a' / name}' ({error}" in caplog.text


def test_the_class_list_is_saved_and_test_mode_labels_with_it(tmp_path, capsys):
    root = tree(tmp_path / "data", {"train": "abc", "val": "ac", "test": "c"})
    args = [
        f"experiment.output_root={tmp_path / 'out'}",
        "experiment.name=shades",
        "data.name=image_folder",
        f"data.root={root}",
        "model.input_size=[3,8,8]",
        "custom_imports=[tests.fixtures.brightness_net]",
        "model.name=brightness_classifier",
        "model.args={num_classes: 3}",
        "data.batch_size=2",
        "train.epochs=1",
    ]
    assert main.main(args) == 0
    assert [r["top1"] for r in rows(tmp_path / "out" / "shades" / "latest")] == [
        1.0,
        1.0,
    ]  # val (a, c) and test (c): c is labelled 2 everywhere
    best = tmp_path / "out" / "shades" / "latest" / "checkpoints" / "best.pt"
    assert Checkpoint.load(best).classes == ["a", "b", "c"]
    # the training data changed since: test mode still uses the saved list
    (root / "train" / "b").rename(root / "train_b")
    capsys.readouterr()
    assert main.main(["--mode", "test", "--checkpoint", str(best)]) == 0
    assert "test: top1=1.0000" in capsys.readouterr().out
