"""--mode predict feeds the network inputs at the size it was trained at, read as the training data's
eval split was (``data.args.image_size``, the digits' ``size``, the mask datasets' ``size``, the eval
transforms), or refuses them in one line naming both sizes and the fix; ``data.args.on_bad_sample``
works whatever dataset the checkpoint was trained on."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import main
from tests.apps.conftest import make_digit_folder
from tests.apps.test_predict import read_csv
from tests.fixtures.outputs import one_error

DIGITS = [0, 1, 2]


def upscaled(source: Path, target: Path, side: int) -> Path:
    """A copy of the digit folder tree with every image resized to side x side."""
    from PIL import Image

    for image in source.rglob("*.png"):
        out = target / image.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        Image.open(image).resize((side, side), Image.BILINEAR).save(out)
    return target


@pytest.fixture(scope="module")
def sixteen(tmp_path_factory) -> dict:
    """An image_folder network trained (2 steps) on 16x16 RGB images, without image_size: the images' own size."""
    base = tmp_path_factory.mktemp("sixteen")
    small = make_digit_folder(base / "eight", {"train": 8, "val": 6, "test": 2})
    data, out = upscaled(small, base / "sixteen", 16), base / "output"
    assert (
        main.main(
            [
                f"experiment.output_root={out}",
                "experiment.name=s",
                "threads=1",
                "data.name=image_folder",
                f"data.root={data}",
                "data.batch_size=4",
                "model.input_size=[3, 16, 16]",
                "model.args={backbone: small_cnn, num_classes: 3, backbone_args: {in_channels: 3, widths: [4, 8]}}",
                "train.iterations=2",
            ]
        )
        == 0
    )
    return {"checkpoint": str(out / "s" / "run_001" / "checkpoints" / "best.pt"), "small": small, "data": data}


def test_inputs_of_another_size_than_the_network_was_trained_at_are_refused_naming_both_and_the_fix(
    sixteen, tmp_path, capsys
):
    """8x8 images reached a network trained at 16x16 as they were: wrong scores without a warning."""
    args = ["--mode", "predict", "--checkpoint", sixteen["checkpoint"], "--input", str(sixteen["small"] / "val")]
    assert main.main([*args, "--output", str(tmp_path / "refused")]) == 2
    error = one_error(capsys)
    assert (
        "reaches the network at 8x8" in error
        and "trained at 16x16 (model.input_size=[3, 16, 16])" in error
        and "resize the inputs to 16x16" in error
    ), error
    assert not (tmp_path / "refused").exists()  # refused before any result: the folder of the start is taken back
    fix = error.split("let predict resize them: ")[1]
    assert fix == "data.eval_transforms=[{name: Resize, size: [16, 16]}]"
    assert main.main([*args, "--output", str(tmp_path / "resized"), fix]) == 0  # the fix named works
    assert len(read_csv(tmp_path / "resized" / "predictions.csv")) == 6
    # the trained size passes as it is
    assert main.main([*args[:-1], str(sixteen["data"] / "val"), "--output", str(tmp_path / "same")]) == 0


def test_a_checkpoint_trained_through_dali_predicts_its_inputs_sized_as_its_pipeline_did(sixteen, tmp_path, capsys):
    """DALI resizes the shorter side to data.args.image_size and cuts the centre square; predict does the same,
    with the torch loader (DALI is not needed)."""
    from PIL import Image

    folder = tmp_path / "wide"
    folder.mkdir()
    for image in sorted((sixteen["small"] / "val").rglob("*.png"))[:3]:
        Image.open(image).resize((12, 8)).save(folder / image.name)  # 12x8: wider than high
    args = ["--mode", "predict", "--checkpoint", sixteen["checkpoint"], "--input", str(folder), "data.loader=dali"]
    assert main.main([*args, "--output", str(tmp_path / "dali"), "data.args.image_size=16"]) == 0
    assert len(read_csv(tmp_path / "dali" / "predictions.csv")) == 3
    assert main.main([*args, "--output", str(tmp_path / "eight"), "data.args.image_size=8"]) == 2
    error = one_error(capsys)
    assert "reaches the network at 8x8" in error and error.endswith(
        "let predict resize them: data.args.image_size=16"
    ), error


@pytest.fixture(scope="module")
def digits16(tmp_path_factory) -> dict:
    """The digits dataset trained at data.args.size=16 (its 8x8 images resized), and its test split as 8x8 PNGs."""
    from PIL import Image

    from utils.data.datasets.digits import Digits

    base = tmp_path_factory.mktemp("digits16")
    out, pngs = base / "output", base / "pngs"
    test = Digits("test", size=8, classes=DIGITS)
    for i in range(len(test)):
        folder = pngs / str(DIGITS[int(test.labels[i])])
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray((test.images[i, 0].numpy() * 255).round().astype(np.uint8), mode="L").save(
            folder / f"{i:03d}.png"
        )
    assert (
        main.main(
            [
                f"experiment.output_root={out}",
                "experiment.name=d",
                "threads=1",
                f"data.args={{size: 16, classes: {DIGITS}}}",
                "model.input_size=[1, 16, 16]",
                "model.args.backbone_args={widths: [8, 16]}",
                "data.batch_size=16",
                "train.epochs=3",
                "optim.lr=0.01",
                "schedule.warmup_epochs=0",
            ]
        )
        == 0
    )
    return {"checkpoint": str(out / "d" / "run_001" / "checkpoints" / "best.pt"), "pngs": pngs, "count": len(test)}


def test_digits_trained_at_another_size_predict_their_8x8_files_resized_as_the_dataset_resizes(
    digits16, tmp_path, capsys
):
    assert main.main(["--mode", "test", "--checkpoint", digits16["checkpoint"]]) == 0
    top1 = float(re.search(r"top1=([\d.]+)", capsys.readouterr().out).group(1))
    assert top1 > 0.6  # trained enough for a size mismatch to show
    assert (
        main.main(
            [
                "--mode",
                "predict",
                "--checkpoint",
                digits16["checkpoint"],
                "--input",
                str(digits16["pngs"]),
                "--output",
                str(tmp_path / "p"),
            ]
        )
        == 0
    )
    rows = read_csv(tmp_path / "p" / "predictions.csv")
    accuracy = sum(Path(r["path"]).parent.name == r["prediction"] for r in rows) / len(rows)
    # 8-bit files: a sample may flip
    assert len(rows) == digits16["count"] and abs(accuracy - top1) <= 2 / len(rows), (
        accuracy,
        top1,
    )


def test_on_bad_sample_works_with_a_dataset_that_reads_no_files(digits16, tmp_path, capsys):
    """digits takes no on_bad_sample: predict reads it for its input files (it was refused as an unknown
    dataset argument, after the error for the unreadable file had advised setting it)."""
    folder = tmp_path / "mixed"
    folder.mkdir()
    for image in sorted((digits16["pngs"] / "1").glob("*.png"))[:3]:
        (folder / image.name).write_bytes(image.read_bytes())
    (folder / "broken.png").write_bytes(b"not an image")
    args = ["--mode", "predict", "--checkpoint", digits16["checkpoint"], "--input", str(folder)]
    assert main.main([*args, "--output", str(tmp_path / "stop")]) == 2
    error = one_error(capsys)
    assert "broken.png" in error and "data.args.on_bad_sample=skip" in error, error
    assert main.main([*args, "--output", str(tmp_path / "skip"), "data.args.on_bad_sample=skip"]) == 0
    assert [Path(r["path"]).name for r in read_csv(tmp_path / "skip" / "predictions.csv")] == sorted(
        p.name for p in folder.glob("0*.png")
    )
    assert "skipping unreadable image" in capsys.readouterr().err
    assert main.main([*args, "--output", str(tmp_path / "typo"), "data.args.on_bad_sample=maybe"]) == 2
    assert one_error(capsys) == "error: predict: data.args.on_bad_sample must be 'stop' or 'skip', got 'maybe'"
    # training still refuses it
    assert (
        main.main(
            ["data.args.on_bad_sample=skip", "train.iterations=1", f"experiment.output_root={tmp_path / 'train'}"]
        )
        == 2
    )
    assert "dataset 'digits' got unknown argument(s) ['on_bad_sample']" in one_error(capsys)
