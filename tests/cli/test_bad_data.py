"""Bad data gets one ``error:`` line naming the file and the fix, exit code 2, no traceback: missing or empty
folders and splits, unreadable images and masks (in a loader worker too), decompression bombs, float images beyond
[0, 1], label maps and colours as masks, classes the train split or the network lacks, channels the network does
not take, images of mixed sizes, crops larger than the image, a run that would take no step; with
data.args.on_bad_sample=skip an unreadable image is a warning instead.

Each case is a row of the README's "Reliability" table. (Config values: tests/cli/test_bad_input.py; bad
checkpoints and resumes: tests/cli/test_bad_checkpoints.py.)
"""

from __future__ import annotations

import re
import shutil
import struct
import zlib
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
from PIL import Image

import main
from tests.conftest import fast_overrides
from tests.fixtures.bad_input import exits_2_with_one_error_line, rgb_folder

SMALL = "model.args.backbone_args={widths: [8, 16]}"


def image_tree(root: Path, bad: bool = False) -> Path:
    """``root/{train,val,test}/{a,b}/*.png``, 8x8 RGB; ``bad`` adds a file that is not an image."""
    rng = np.random.default_rng(0)
    for split in ("train", "val", "test"):
        for label in ("a", "b"):
            folder = root / split / label
            folder.mkdir(parents=True)
            for i in range(3):
                Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    if bad:
        (root / "train" / "a" / "broken.png").write_bytes(b"\x89PNG truncated")
    return root


def add_images(root: Path, *folders: str, size: tuple = (8, 8), name: str = "0.png") -> Path:
    """One RGB image of ``size`` (height, width) in each of ``folders`` under ``root``."""
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.zeros((*size, 3), dtype=np.uint8)).save(root / folder / name)
    return root


def add_bomb(root: Path) -> Path:
    """A PNG that declares 14000 x 14000 pixels (196 megapixels: PIL's DecompressionBombError)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 14000, 14000, 1, 0, 0, 0, 0)
    (root / "train" / "a" / "bomb.png").write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    )
    return root


def add_file(root: Path, rel: str, write) -> Path:
    """``write(path)`` for ``root/rel`` (a real file of the kind the case needs); returns ``root``."""
    write(root / rel)
    return root


def float_image(path: Path) -> None:
    Image.fromarray(np.linspace(0, 2.5, 64, dtype=np.float32).reshape(8, 8)).save(path)  # 32-bit float beyond [0, 1]


def label_mask(path: Path) -> None:
    """A segmentation label map (0, 1, 2) in place of a saliency mask, at the image's size."""
    shape = np.array(Image.open(path)).shape
    Image.fromarray((np.arange(shape[0] * shape[1]).reshape(shape) % 3).astype(np.uint8)).save(path)


def colour_mask(path: Path) -> None:
    shape = np.array(Image.open(path)).shape
    colours = np.zeros((*shape, 3), np.uint8)
    colours[: shape[0] // 2, :, 0], colours[shape[0] // 2 :, :, 2] = 255, 255  # red and blue halves on no black
    colours[0, 0] = 0
    Image.fromarray(colours).save(path)


def sod_folder(root: Path, *extra: str) -> List[str]:
    """An image_mask_folder run on ``root`` (see ``shapes``) with the sod demo config."""
    return [
        "--config",
        "configs/sod_shapes.yaml",
        f"experiment.output_root={root / 'out'}",
        "experiment.name=bad",
        "data.name=image_mask_folder",
        f"data.root={root}",
        "data.args={size: 32}",
        "data.batch_size=2",
        "train.epochs=1",
        *extra,
    ]


def shapes(root: Path) -> Path:
    """``root/{train,val,test}/{Image,Mask}``: 2 shapes_sod scenes each, of different sizes."""
    from utils.data.datasets.shapes_sod import write_split

    for split in ("train", "val", "test"):
        write_split(root, split, 2)
    return root


# name -> (arguments given the tmp folder, expected message)
CASES: Dict[str, tuple] = {
    "missing data folder": (
        lambda tmp: rgb_folder(tmp / "nowhere"),
        r"data folder '.*nowhere/train' does not exist; expected <root>/train/<class>/<image>",
    ),
    "empty data folder": (
        lambda tmp: (tmp / "empty" / "train").mkdir(parents=True) or rgb_folder(tmp / "empty"),
        r"data folder '.*empty/train' holds no images",
    ),
    "unreadable image": (
        lambda tmp: rgb_folder(image_tree(tmp / "imgs", bad=True)),
        r"cannot read image '.*broken.png' \(UnidentifiedImageError\); fix or remove the file, or set data.args.on_bad_sample=skip",
    ),
    "wrong channel count": (
        lambda tmp: [SMALL.replace("widths", "in_channels: 3, widths")],
        r"the data has 1 channel\(s\) per input but the network's first layer expects 3; set the backbone's in_channels",
    ),
    "class folder that the train split lacks": (
        lambda tmp: rgb_folder(add_images(image_tree(tmp / "imgs"), "val/c")),
        r"class folder\(s\) \['c'\] in '.*imgs/val' are not classes of the training split \(a, b\); remove them, add them to the train split, or list every class in data.args.classes",
    ),
    "more classes than the network's outputs": (
        lambda tmp: rgb_folder(add_images(image_tree(tmp / "imgs"), "train/c", "val/c")),
        r"the data has 3 classes \(a, b, c\) but the network outputs 2 score\(s\) per sample; give the network 3 outputs \(e.g. model.args.num_classes=3\) or train on fewer classes",
    ),
    "decompression bomb (image_folder)": (
        lambda tmp: rgb_folder(add_bomb(image_tree(tmp / "imgs"))),
        r"cannot read image '.*bomb.png' \(DecompressionBombError\); fix or remove the file, or set data.args.on_bad_sample=skip",
    ),
    "images of mixed sizes without a resize": (
        lambda tmp: rgb_folder(
            add_images(image_tree(tmp / "imgs"), "train/a", size=(10, 12), name="big.png"), "data.batch_size=7"
        ),
        r"images of different sizes cannot form a batch: .*big.png' is 12x10.*\(width x height, after the transforms\); resize them all to one size: data.args.image_size=N, or a Resize",
    ),
    "unreadable image in a loader worker": (
        lambda tmp: rgb_folder(image_tree(tmp / "imgs", bad=True), "data.num_workers=1"),
        r"^error: cannot read image '.*broken.png' \(UnidentifiedImageError\); fix or remove the file, or set data.args.on_bad_sample=skip$",
    ),
    "32-bit float image beyond [0, 1] (image_folder)": (
        lambda tmp: rgb_folder(add_file(image_tree(tmp / "imgs"), "train/a/f.tif", float_image)),
        r"image '.*train/a/f.tif' is 32-bit float \(PIL mode F\) with values from 0 to 2.5, outside the 0..1 it is read from; save it scaled to \[0, 1\], or as 8- or 16-bit integers, or set data.args.on_bad_sample=skip",
    ),
    "data.args.channels not 1 or 3": (
        lambda tmp: rgb_folder(image_tree(tmp / "imgs"), "data.args={channels: 2}"),
        r"image_folder: data.args.channels must be 1 \(grey\) or 3 \(RGB\), got 2",
    ),
    "unreadable mask (image_mask_folder)": (
        lambda tmp: sod_folder(
            add_file(shapes(tmp / "sod"), "train/Mask/train_00001.png", lambda p: p.write_bytes(b"not a png"))
        ),
        r"cannot read mask '.*train/Mask/train_00001.png' \(UnidentifiedImageError\); fix or remove the file, or set data.args.on_bad_sample=skip",
    ),
    "label map as a mask (image_mask_folder)": (
        lambda tmp: sod_folder(add_file(shapes(tmp / "sod"), "train/Mask/train_00001.png", label_mask)),
        r"mask '.*train_00001.png' holds the values 0, 1, 2: the largest is below half of the range 0..255 it falls in \(label indices\?\); save it as grey with 0 for the background and 255 for the object \(soft values between\), or set data.args.on_bad_sample=skip",
    ),
    "mask of several colours (image_mask_folder)": (
        lambda tmp: sod_folder(add_file(shapes(tmp / "sod"), "train/Mask/train_00001.png", colour_mask)),
        r"mask '.*train_00001.png' holds 3 colours \(\(0, 0, 0\), \(0, 0, 255\), \(255, 0, 0\)\); a saliency mask is grey, or one colour on black: save it as grey",
    ),
    "images of mixed sizes with size: null (image_mask_folder)": (
        lambda tmp: sod_folder(shapes(tmp / "sod"), "data.args={size: null}"),
        r"images of different sizes cannot form a batch: '.*/train/Image/train_0000[01].png' is \d+x\d+ and '.*/train/Image/train_0000[01].png' is \d+x\d+ \(width x height, after the transforms\); resize them all to one size: data.args.size=N \(or \[height, width\]\)",
    ),
    "missing test split (image_folder)": (
        lambda tmp: shutil.rmtree(image_tree(tmp / "imgs") / "test") or rgb_folder(tmp / "imgs"),
        r"data folder '.*imgs/test' does not exist; expected <root>/test/<class>/<image>; data.test_split names the split folder that testing reads \(e.g. data.test_split=val\)",
    ),
    "empty class folder (image_folder)": (
        lambda tmp: (image_tree(tmp / "imgs") / "train" / "c").mkdir() or rgb_folder(tmp / "imgs"),
        r"class folder '.*imgs/train/c' holds no images \(looked for .jpg, .*\); add its images or remove the folder",
    ),
    "crop larger than the image": (
        lambda tmp: rgb_folder(image_tree(tmp / "imgs"), "data.train_transforms=[{name: RandomCrop, size: 12}]"),
        r"data.train_transforms: a crop of 12x12 is larger than the image it gets, 8x8 \(width x height\); put a Resize before it, make the crop smaller, or let RandomCrop pad \(pad_if_needed: true\)",
    ),
    "a run that would take no step": (
        lambda tmp: rgb_folder(add_images(tmp / "one", "train/a", "val/a", "test/a")),
        r"^error: training would take no step: the training split has 1 sample\(s\) per process and data.batch_size is 2; its only batch would hold 1 sample, .*data.drop_last",
    ),
}


# a worker process
@pytest.mark.parametrize(
    "case", [pytest.param(c, marks=pytest.mark.slow) if "loader worker" in c else c for c in sorted(CASES)]
)
def test_bad_data_is_one_line_and_exit_code_2(case, tmp_path, capsys):
    make_args, expected = CASES[case]
    exits_2_with_one_error_line(make_args(tmp_path), expected, tmp_path, capsys)


def test_unreadable_images_are_skipped_with_a_warning_when_asked(tmp_path, caplog):
    args = [
        *fast_overrides(tmp_path / "out", "skip", epochs=1),
        *rgb_folder(image_tree(tmp_path / "imgs", bad=True), "data.args={on_bad_sample: skip}"),
    ]
    assert main.main(args) == 0
    assert re.search(r"skipping unreadable image '.*broken.png'", caplog.text)
