"""Masks as stored: 0/255, 0/1, boolean, palette, colour, 16-bit and soft masks give the same
targets and the same metrics, other encodings are refused by name; image_mask_folder's bad
files follow data.args.on_bad_sample and mixed sizes name two files."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Callable, Dict

import numpy as np
import pytest
import torch
from PIL import Image

import main
from tests.cli.test_train import printed_metrics
from utils.config.schema import DataConfig
from utils.data import build_dataset, build_eval_loader
from utils.data.datasets.shapes_sod import write_split
from utils.errors import DataError
from utils.metrics.sod import SODMetrics

OBJECT = np.zeros((6, 8), dtype=bool)
OBJECT[1:5, 2:7] = True  # the salient object of every encoding below


def _palette(colour) -> Image.Image:
    image = Image.fromarray(OBJECT.astype(np.uint8), mode="P")
    image.putpalette([0, 0, 0, *colour] + [0] * 762)
    return image


def _colour(colour) -> Image.Image:
    return Image.fromarray((OBJECT[..., None] * np.array(colour)).astype(np.uint8))


# the same object, saved the ways users save masks
ENCODINGS: Dict[str, Callable[[], Image.Image]] = {
    "grey 0/255": lambda: Image.fromarray(OBJECT.astype(np.uint8) * 255),
    "grey 0/1": lambda: Image.fromarray(OBJECT.astype(np.uint8)),
    "grey 0/128": lambda: Image.fromarray(OBJECT.astype(np.uint8) * 128),
    "boolean (mode 1)": lambda: Image.fromarray(OBJECT),
    "palette, white object": lambda: _palette((255, 255, 255)),
    "palette, VOC red object": lambda: _palette((128, 0, 0)),
    "RGB red on black": lambda: _colour((255, 0, 0)),
    "RGB white on black": lambda: _colour((255, 255, 255)),
    "16-bit 0/65535": lambda: Image.fromarray(OBJECT.astype(np.uint16) * 65535),
    "opaque grey + alpha": lambda: Image.fromarray(OBJECT.astype(np.uint8) * 255).convert("LA"),
}


def mask_folder(root: Path, mask: Image.Image, count: int = 2, split: str = "test") -> Path:
    """``root/<split>/{Image,Mask}``: ``count`` random RGB images with ``mask`` as every mask."""
    rng = np.random.default_rng(0)
    for sub in ("Image", "Mask"):
        (root / split / sub).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        Image.fromarray(rng.integers(0, 256, (*OBJECT.shape, 3), dtype=np.uint8)).save(
            root / split / "Image" / f"{i}.png"
        )
        mask.save(root / split / "Mask" / f"{i}.png")
    return root


def dataset(root: Path, split: str = "test", **args):
    return build_dataset(DataConfig(name="image_mask_folder", root=str(root), args={"size": None, **args}), split)


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_every_binary_encoding_gives_the_same_targets_and_ground_truth(tmp_path, encoding):
    _, target = dataset(mask_folder(tmp_path, ENCODINGS[encoding]()))[0]
    expected = torch.from_numpy(OBJECT.astype(np.float32))
    assert torch.equal(target["mask"][0], expected)
    assert np.array_equal(target["original"], OBJECT.astype(np.float32))


def test_soft_masks_keep_their_levels(tmp_path):
    soft = (OBJECT * 200 + np.arange(OBJECT.size).reshape(OBJECT.shape) % 50).astype(np.uint8)  # anti-aliased edges
    _, target = dataset(mask_folder(tmp_path / "8", Image.fromarray(soft)))[0]
    assert torch.allclose(target["mask"][0], torch.from_numpy(soft / 255.0).float())
    _, target = dataset(mask_folder(tmp_path / "16", Image.fromarray(soft.astype(np.uint16) * 257)))[0]
    assert torch.allclose(target["mask"][0], torch.from_numpy(soft / 255.0).float())


def _labels() -> Image.Image:
    labels = OBJECT.astype(np.uint8)
    labels[5, :] = 2  # a second class below the object: a segmentation label map, not saliency
    return Image.fromarray(labels)


def _three_colours() -> Image.Image:
    colours = np.zeros((*OBJECT.shape, 3), np.uint8)
    colours[OBJECT] = (255, 0, 0)
    colours[0, :] = (0, 0, 255)
    return Image.fromarray(colours)


def _transparent() -> Image.Image:
    alpha = OBJECT.astype(np.uint8) * 255
    return Image.fromarray(np.dstack([alpha] * 4))  # a cut-out: the background is see-through


REFUSED = {
    "label indices": (
        _labels,
        r"mask '.*0.png' holds the values 0, 1, 2: the largest is below half of the range 0..255",
    ),
    "two values, no background": (
        lambda: Image.fromarray((OBJECT * 100 + 100).astype(np.uint8)),
        r"mask '.*0.png' holds two values, 100, 200, and neither is 0",
    ),
    "three colours": (
        _three_colours,
        r"mask '.*0.png' holds 3 colours \(\(0, 0, 0\), \(0, 0, 255\), \(255, 0, 0\)\); a saliency mask is grey, or one colour on black",
    ),
    "transparent": (_transparent, r"mask '.*0.png' has transparent pixels"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_encodings_no_rule_reads_are_refused_by_name_or_skipped(tmp_path, caplog, case):
    make, message = REFUSED[case]
    root = mask_folder(tmp_path, ENCODINGS["grey 0/255"](), count=2)
    make().save(root / "test" / "Mask" / "0.png")
    with pytest.raises(
        DataError,
        match=message
        + r".*save it as grey with 0 for the background and 255 for the object.*, or set data.args.on_bad_sample=skip",
    ):
        dataset(root)[0]
    skipping = dataset(root, on_bad_sample="skip")
    assert skipping[0][1]["name"] == "1" and re.search(r"skipping " + message, caplog.text)


def test_the_metric_scores_every_encoding_of_the_ground_truth_alike():
    logits = torch.from_numpy(np.where(OBJECT, 3.0, -3.0)).float()[None, None]
    logits[0, 0, 0, :3] = 1.0  # a few false alarms, so the numbers are not all perfect
    results = []
    for gt in (OBJECT.astype(np.uint8) * 255, OBJECT.astype(np.uint8), OBJECT, OBJECT.astype(np.float32)):
        metric = SODMetrics()
        metric.update(logits, {"mask": torch.zeros(1, 1, *OBJECT.shape), "original": [gt], "name": ["a"]})
        results.append(metric.result())
    assert results[0]["max_f"] > 0.8
    assert all(r == results[0] for r in results[1:])  # 0/1 gave max_f=0 when the ground truth was cut at 128


def test_unreadable_images_and_masks_stop_or_are_skipped(tmp_path, caplog):
    root = mask_folder(tmp_path, ENCODINGS["grey 0/255"](), count=3)
    (root / "test" / "Image" / "0.png").write_bytes(b"\x89PNG truncated")
    (root / "test" / "Mask" / "1.png").write_bytes(b"not a mask")
    with pytest.raises(
        DataError,
        match=r"cannot read image '.*Image/0.png' \(UnidentifiedImageError\); fix or remove the file, or set data.args.on_bad_sample=skip",
    ):
        dataset(root)[0]
    with pytest.raises(DataError, match=r"cannot read mask '.*Mask/1.png' \(UnidentifiedImageError\)"):
        dataset(root)[1]
    skipping = dataset(root, on_bad_sample="skip")
    assert [skipping[i][1]["name"] for i in range(3)] == ["2", "2", "2"]
    assert "skipping unreadable image" in caplog.text and "skipping unreadable mask" in caplog.text


def test_mixed_sizes_without_a_size_name_two_files_and_the_fix(tmp_path):
    root = mask_folder(tmp_path, ENCODINGS["grey 0/255"](), count=2)
    Image.fromarray(np.zeros((5, 9, 3), np.uint8)).save(root / "test" / "Image" / "1.png")
    Image.fromarray(np.zeros((5, 9), np.uint8)).save(root / "test" / "Mask" / "1.png")
    loader = build_eval_loader(dataset(root), DataConfig(batch_size=2), rank=0, world_size=1)
    with pytest.raises(
        DataError,
        match=r"images of different sizes cannot form a batch: '.*Image/0.png' is 8x6 and '.*Image/1.png' is 9x5 .*data.args.size=N",
    ):
        next(iter(loader))


@pytest.mark.slow  # over 2 s
def test_0_1_masks_train_and_score_as_0_255_masks(tmp_path, capsys):
    """The same scenes on disk twice, masks as 0/255 and as 0/1: the same run, the same metrics."""
    for split, count in (("train", 32), ("val", 4), ("test", 4)):
        write_split(tmp_path / "255", split, count)
    shutil.copytree(tmp_path / "255", tmp_path / "01")
    for path in (tmp_path / "01").glob("*/Mask/*.png"):
        Image.fromarray((np.array(Image.open(path)) // 255).astype(np.uint8)).save(path)
    results = {}
    for encoding in ("255", "01"):
        args = [
            "--config",
            "configs/sod_shapes.yaml",
            f"experiment.output_root={tmp_path / 'out'}",
            f"experiment.name=m{encoding}",
            "data.name=image_mask_folder",
            f"data.root={tmp_path / encoding}",
            "data.args={size: 32}",
            "train.epochs=1",
            "eval.save_predictions=false",
            "hooks=[{name: saliency_grid, enabled: false}]",
        ]
        assert main.main(args) == 0
        results[encoding] = printed_metrics(capsys.readouterr().out)
    # 0/1 masks scored max_f=0 (and trained on targets of 1/255)
    assert results["01"] == results["255"] and results["255"]["max_f"] > 0.1
