"""Images as stored: every PIL mode reaches the network at its real range (16-bit is scaled,
never clipped), EXIF orientation is applied, ``channels`` picks 1 or 3, and a 16-bit folder
trains as its 8-bit copy does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Dict, Tuple

import numpy as np
import pytest
import torch
from PIL import Image

import main
from tests.cli.test_train import printed_metrics
from utils.config.load import load_config
from utils.data import build_dataset
from utils.errors import ConfigError, DataError

GREY = np.array([[0, 1000, 20000], [35000, 50000, 65535]], dtype=np.uint16)  # 16-bit levels that 8 bits merge or clip
RGB = np.array(
    [[[255, 0, 0], [0, 255, 0], [0, 0, 255]], [[10, 20, 30], [200, 100, 50], [255, 255, 255]]], dtype=np.uint8
)


def _palette() -> Image.Image:
    image = Image.fromarray(np.array([[0, 1, 2], [2, 1, 0]], dtype=np.uint8), mode="P")
    image.putpalette([0, 0, 0, 128, 0, 0, 30, 200, 90] + [0] * 759)
    return image


# mode -> (file name, the image, the values [C, H, W] it must give with channels=3)
def _cases() -> Dict[str, Tuple[str, Callable[[], Image.Image], Callable[[], np.ndarray]]]:
    grey3 = lambda a, scale: np.repeat((a.astype(np.float64) / scale)[None], 3, axis=0)  # noqa: E731
    rgb = lambda image: np.array(image.convert("RGB"), dtype=np.float64).transpose(2, 0, 1) / 255  # noqa: E731
    return {
        "1": ("a.png", lambda: Image.fromarray(GREY > 30000), lambda: grey3(GREY > 30000, 1)),
        "L": ("a.png", lambda: Image.fromarray((GREY >> 8).astype(np.uint8)), lambda: grey3(GREY >> 8, 255)),
        "LA": (
            "a.png",
            lambda: Image.fromarray((GREY >> 8).astype(np.uint8)).convert("LA"),
            lambda: grey3(GREY >> 8, 255),
        ),
        "P": ("a.png", _palette, lambda: rgb(_palette())),
        "RGB": ("a.png", lambda: Image.fromarray(RGB), lambda: RGB.transpose(2, 0, 1) / 255),
        "RGBA": ("a.png", lambda: Image.fromarray(RGB).convert("RGBA"), lambda: RGB.transpose(2, 0, 1) / 255),
        "CMYK": (
            "a.tif",
            lambda: Image.fromarray(RGB).convert("CMYK"),
            lambda: rgb(Image.fromarray(RGB).convert("CMYK")),
        ),
        "I;16": ("a.png", lambda: Image.fromarray(GREY), lambda: grey3(GREY, 65535)),
        "I;16B": ("a.tif", lambda: Image.fromarray(GREY.astype(">u2")), lambda: grey3(GREY, 65535)),
        "I": ("a.tif", lambda: Image.fromarray(GREY.astype(np.int32)), lambda: grey3(GREY, 65535)),
        "F": (
            "a.tif",
            lambda: Image.fromarray((GREY / 65535).astype(np.float32)),
            lambda: grey3((GREY / 65535).astype(np.float32), 1),
        ),
    }


CASES = _cases()


def one_image_folder(root: Path, name: str, image: Image.Image, **save) -> Path:
    """``root/{train,val,test}/a/<name>``: the same image in every split."""
    for split in ("train", "val", "test"):
        (root / split / "a").mkdir(parents=True, exist_ok=True)
        image.save(root / split / "a" / name, **save)
    return root


def dataset(root: Path, *args: str, split: str = "train"):
    return build_dataset(load_config(None, ["data.name=image_folder", f"data.root={root}", *args]).data, split)


@pytest.mark.parametrize("mode", sorted(CASES))
def test_every_mode_reads_at_its_real_range(tmp_path, mode):
    name, make, expected = CASES[mode]
    image = make()
    assert image.mode == mode
    root = one_image_folder(tmp_path, name, image)
    assert Image.open(root / "train" / "a" / name).mode == mode  # stored as that mode, read back as it
    values = dataset(root)[0][0]
    assert values.dtype == torch.float32 and values.shape == (3, 2, 3)
    assert torch.allclose(values.double(), torch.from_numpy(expected()), atol=1e-6)


def test_sixteen_bit_grey_keeps_every_level_in_one_channel_when_asked(tmp_path):
    root = one_image_folder(tmp_path, "a.png", Image.fromarray(GREY))
    values = dataset(root, "data.args={channels: 1}")[0][0]
    assert values.shape == (1, 2, 3)
    # every 16-bit level
    assert torch.equal((values[0].double() * 65535).round().long(), torch.from_numpy(GREY.astype(np.int64)))
    colour = dataset(one_image_folder(tmp_path / "rgb", "a.png", Image.fromarray(RGB)), "data.args={channels: 1}")[0][0]
    luma = (RGB.astype(np.float64) / 255) @ np.array([0.299, 0.587, 0.114])
    assert colour.shape == (1, 2, 3) and torch.allclose(colour[0].double(), torch.from_numpy(luma), atol=1e-6)
    with pytest.raises(ConfigError, match=r"image_folder: data.args.channels must be 1 \(grey\) or 3 \(RGB\), got 2"):
        dataset(root, "data.args={channels: 2}")


@pytest.mark.parametrize(
    "mode, values, shown",
    [
        ("F", [[0.0, 2.5]], "values from 0 to 2.5, outside the 0..1"),
        ("F", [[np.nan, 0.5]], "NaN or infinite values"),
        ("I", [[-1, 70000]], "values from -1 to 70000, outside the 0..65535"),
    ],
)
def test_32_bit_values_outside_the_read_range_are_refused_not_clipped(tmp_path, caplog, mode, values, shown):
    dtype = np.float32 if mode == "F" else np.int32
    root = one_image_folder(tmp_path, "a.tif", Image.fromarray(np.array(values, dtype=dtype)))
    Image.fromarray(np.zeros((1, 2), np.uint8)).save(root / "train" / "a" / "b.png")
    with pytest.raises(
        DataError,
        match=rf"image '.*a.tif' is 32-bit .*\(PIL mode {mode}\) with {shown}.*; save it .*, or set data.args.on_bad_sample=skip",
    ):
        dataset(root)[0]
    skipping = dataset(root, "data.args={on_bad_sample: skip}")
    assert torch.equal(skipping[0][0], skipping[1][0])  # a.tif is replaced by b.png
    assert re.search(r"skipping image '.*a.tif' is 32-bit", caplog.text)


def test_8_bit_images_with_a_resize_give_torchvisions_numbers(tmp_path):
    """The common case keeps its exact values: ToImage -> Resize (on uint8) -> ToDtype, as before."""
    from torchvision.transforms import v2

    noise = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    root = one_image_folder(tmp_path, "a.png", Image.fromarray(noise))
    reference = v2.Compose([v2.ToImage(), v2.Resize((8, 8), antialias=True), v2.ToDtype(torch.float32, scale=True)])(
        Image.fromarray(noise)
    )
    assert torch.equal(dataset(root, "data.args={image_size: 8}")[0][0], reference)


def test_exif_orientation_is_applied(tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to view": a camera held upright stores the picture on its side
    stored = np.arange(8, dtype=np.uint8).reshape(2, 4) * 30
    root = one_image_folder(tmp_path, "a.png", Image.fromarray(stored), exif=exif)
    values = dataset(root)[0][0]
    upright = np.rot90(stored, k=-1)  # 90 degrees clockwise
    assert values.shape == (3, 4, 2)
    assert torch.allclose(values[0].double(), torch.from_numpy(upright.copy() / 255.0), atol=1e-6)


# 16-bit class brightness: 8-bit copies differ (78, 136, 195), convert("RGB") made all three white
LEVELS = (
    20000,
    35000,
    50000,
)


def brightness_folder(root: Path, eight_bit: bool) -> Path:
    """Three classes of noisy grey 8x8 images around LEVELS, as 16-bit PNGs or their 8-bit copies."""
    rng = np.random.default_rng(0)
    for split, count in (("train", 12), ("val", 4), ("test", 4)):
        for name, level in zip("abc", LEVELS):
            (root / split / name).mkdir(parents=True)
            for i in range(count):
                values = np.clip(level + rng.normal(0, 2500, (8, 8)), 0, 65535).astype(np.uint16)
                image = (
                    Image.fromarray((values / 257).round().astype(np.uint8)) if eight_bit else Image.fromarray(values)
                )
                image.save(root / split / name / f"{i}.png")
    return root


def test_a_16_bit_grey_folder_trains_as_its_8_bit_copy(tmp_path, capsys):
    results = {}
    for eight_bit in (False, True):
        root = brightness_folder(tmp_path / f"bits{8 if eight_bit else 16}", eight_bit)
        args = [
            f"experiment.output_root={tmp_path / 'out'}",
            f"experiment.name={root.name}",
            "data.name=image_folder",
            f"data.root={root}",
            "model.input_size=[3,8,8]",
            "model.args={num_classes: 3, backbone: small_cnn, backbone_args: {in_channels: 3, widths: [8]}}",
            "data.batch_size=6",
            "train.epochs=10",
            "optim.lr=0.01",
        ]
        assert main.main(args) == 0
        results[eight_bit] = printed_metrics(capsys.readouterr().out)["top1"]
    assert results[True] >= 0.9  # the task is learnable in this budget
    assert results[False] == results[True]  # chance (0.33) when 16-bit images were clipped to white
