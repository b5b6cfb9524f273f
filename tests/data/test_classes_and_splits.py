"""Classes and splits as users' folders hold them: hidden and debris names are never classes or
samples, an empty class folder and a missing split folder are errors naming them, a split that
lacks classes is a warning naming them, and the class-count error names the classes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from utils.config.load import load_config
from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.engine.input_check import check_output_classes
from utils.errors import ConfigError, DataError

JUNK = b"\x00\x05\x16\x07 AppleDouble resource fork, not an image"


def image(path: Path, shade: int = 0, size: tuple = (8, 8)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((*size, 3), shade, dtype=np.uint8)).save(path)


def tree(root: Path, splits=("train", "val", "test"), classes="ab", count: int = 2) -> Path:
    for split in splits:
        for name in classes:
            for i in range(count):
                image(root / split / name / f"{i}.png", 100 * "abc".index(name))
    return root


def add_debris(folder: Path) -> None:
    """What notebooks, macOS, Windows and NAS boxes leave in a folder: some of it valid images."""
    image(folder / ".ipynb_checkpoints" / "0-checkpoint.png")
    image(folder / "@eaDir" / "SYNOFILE_THUMB_M.jpg")
    (folder / "__MACOSX").mkdir(exist_ok=True)
    (folder / "__MACOSX" / "._0.png").write_bytes(JUNK)
    (folder / "._0.png").write_bytes(JUNK)
    for name in (".DS_Store", "Thumbs.db", "desktop.ini"):
        (folder / name).write_bytes(JUNK)


def image_folder(root: Path, *extra: str) -> DataConfig:
    return load_config(None, ["data.name=image_folder", f"data.root={root}", *extra]).data


def test_hidden_and_debris_names_are_never_classes_or_samples(tmp_path):
    root = tree(tmp_path)
    for folder in (root / "train", root / "train" / "a", root / "val", root / "val" / "b"):
        add_debris(folder)
    train = build_dataset(image_folder(root), "train")
    val = build_dataset(image_folder(root), "val", train.classes)
    assert train.classes == val.classes == ["a", "b"]
    assert [Path(train.path(i)).relative_to(root).as_posix() for i in range(len(train))] == [
        "train/a/0.png",
        "train/a/1.png",
        "train/b/0.png",
        "train/b/1.png",
    ]
    assert [label for _, label in val] == [0, 0, 1, 1]  # every sample reads, labels unshifted


def test_image_mask_folder_ignores_apple_double_and_hidden_files(tmp_path):
    for sub in ("Image", "Mask"):
        image(tmp_path / "train" / sub / "0.png")
    (tmp_path / "train" / "Mask" / "._0.png").write_bytes(JUNK)
    (tmp_path / "train" / "Image" / ".DS_Store").write_bytes(JUNK)
    dataset = build_dataset(DataConfig(name="image_mask_folder", root=str(tmp_path), args={"size": None}), "train")
    assert len(dataset) == 1 and dataset[0][1]["name"] == "0"


def frames(folder: Path, count: int = 4) -> None:
    for i in range(count):
        image(folder / f"{i}.png", 30 * i)


def test_video_frames_folder_ignores_debris_and_refuses_empty_class_folders(tmp_path):
    for name in "ab":
        frames(tmp_path / "train" / name / "v0")
    frames(tmp_path / "train" / ".ipynb_checkpoints" / "v0")
    (tmp_path / "train" / "a" / "v0" / "._0.png").write_bytes(JUNK)
    args = {"clip_len": 4, "num_clips": 1}
    dataset = build_dataset(DataConfig(name="video_frames_folder", root=str(tmp_path), args=args), "train")
    assert dataset.classes == ["a", "b"] and dataset.frame_counts.tolist() == [4, 4]
    (tmp_path / "train" / "c").mkdir()
    with pytest.raises(
        DataError, match=r"class folder '.*train/c' holds no video folders; .*add its videos or remove the folder"
    ):
        build_dataset(DataConfig(name="video_frames_folder", root=str(tmp_path), args=args), "train")


@pytest.mark.parametrize("split", ["train", "val"])
def test_an_empty_class_folder_is_an_error_naming_it(tmp_path, split):
    root = tree(tmp_path)
    (root / split / "c").mkdir()
    (root / "train" / "c").mkdir(exist_ok=True)
    (root / split / "c" / ".DS_Store").write_bytes(JUNK)  # only debris: still empty
    with pytest.raises(
        DataError,
        match=rf"class folder '.*{split}/c' holds no images \(looked for .jpg, .*\); add its images or remove the folder",
    ):
        build_dataset(image_folder(root), split, ["a", "b", "c"])


def test_a_missing_test_folder_is_an_error_and_data_test_split_names_another(tmp_path):
    root = tree(tmp_path, splits=("train", "val"))
    with pytest.raises(
        DataError,
        match=r"data folder '.*/test' does not exist; expected <root>/test/<class>/<image>; data.test_split names the split folder",
    ):
        build_dataset(image_folder(root), "test")
    tested = build_dataset(image_folder(root, "data.test_split=val"), "test")
    assert tested.root == str(root / "val") and len(tested) == 4


def test_a_split_lacking_training_classes_is_a_warning_naming_them_once(tmp_path, caplog):
    root = tree(tmp_path / "data", splits=("train",), classes="abc")
    tree(root, splits=("val",), classes="a")
    for _ in range(2):  # training builds the split, and testing may build it again
        build_dataset(image_folder(root), "val", ["a", "b", "c"])
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert (
        len(warnings) == 1
        and "has no samples of 2 of the 3 classes (b, c)" in warnings[0]
        and str(root / "val") in warnings[0]
    )


def test_the_class_count_error_names_the_classes_shortened_when_long():
    with pytest.raises(
        ConfigError, match=r"the data has 3 classes \(cat, dog, eel\) but the network outputs 2 score\(s\) per sample"
    ):
        check_output_classes(torch.zeros(4, 2), 3, ["cat", "dog", "eel"])
    many = [f"class{i:02d}" for i in range(30)]
    with pytest.raises(ConfigError, match=r"the data has 30 classes \(class00, .*, class09 \.\.\. and 20 more\) but"):
        check_output_classes(torch.zeros(4, 10), 30, many)
    check_output_classes(torch.zeros(4, 3), 3, ["cat", "dog", "eel"])  # enough outputs: no error
