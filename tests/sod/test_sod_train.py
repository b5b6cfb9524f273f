"""main.py on the synthetic SOD config: a shortened run in the suite, the full acceptance run on request."""

import os

import numpy as np
import pytest
from PIL import Image

import main
from tests.cli.test_train import printed_metrics
from tests.fixtures.metrics_rows import rows
from utils.data.datasets.shapes_sod import render_scene, write_split

pytestmark = pytest.mark.slow  # trains the SOD demo

SOD_NAMES = {"mae", "max_f", "mean_f", "s_measure", "e_measure", "weighted_f"}


def test_short_sod_run_writes_metrics_and_original_size_predictions(out_root, capsys):
    args = [
        "--config",
        "configs/sod_shapes.yaml",
        f"experiment.output_root={out_root}",
        "experiment.name=sod",
        "data.args.counts={train: 320, val: 8, test: 9}",
        "train.epochs=2",
    ]
    assert main.main(args) == 0
    trained = printed_metrics(capsys.readouterr().out)
    assert SOD_NAMES <= set(trained)
    assert trained["max_f"] > 0.6 and trained["mae"] < 0.25  # learned something in 40 steps

    run = out_root / "sod" / "latest"
    recorded = rows(run)
    assert [r["split"] for r in recorded] == ["val", "val", "test"] and SOD_NAMES <= set(recorded[-1])
    maps = sorted((run / "predictions").glob("*.png"))
    assert [p.stem for p in maps] == [f"test_{i:05d}" for i in range(9)]
    for i, path in enumerate(maps):
        saliency = np.asarray(Image.open(path))
        assert saliency.dtype == np.uint8 and saliency.shape == render_scene(0, "test", i)[1].shape

    # image / ground truth / prediction of the same 8 images after each validation, and of the test split
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"), size_guidance={"images": 0})
    acc.Reload()
    val, test = acc.Images("val/saliency_grid"), acc.Images("test/saliency_grid")
    assert [e.step for e in val] == [20, 40] and len(test) == 1  # at the step that ended each epoch (20 steps)
    size = (84 + 8 * 96 + 10 * 4, 3 * 96 + 4 * 4)  # rows image, ground truth, prediction: a name, then 8 tiles of 96 px
    assert {(e.width, e.height) for e in val} == {size}
    assert (test[0].width, test[0].height) == size  # 9 test images: the first 8

    # test mode reproduces the numbers from the checkpoint alone and writes the maps into its own folder
    assert main.main(["--mode", "test", "--checkpoint", str(run / "checkpoints" / "best.pt")]) == 0
    assert printed_metrics(capsys.readouterr().out) == trained
    tested = sorted((out_root / "sod" / "test_001" / "predictions").glob("*.png"))
    assert [p.read_bytes() for p in tested] == [p.read_bytes() for p in maps]

    # --mode predict on the test scenes written as PNG files: resized as the dataset resizes, the same maps
    images = write_split(out_root / "pngs", "test", 9) / "Image"
    assert (
        main.main(
            [
                "--mode",
                "predict",
                "--checkpoint",
                str(run / "checkpoints" / "best.pt"),
                "--input",
                str(images),
                "--output",
                str(out_root / "predicted"),
            ]
        )
        == 0
    )
    predicted = sorted((out_root / "predicted" / "masks").glob("*.png"))
    assert [p.name for p in predicted] == [p.name for p in maps]
    assert [p.read_bytes() for p in predicted] == [p.read_bytes() for p in maps]


@pytest.mark.skipif(
    not os.environ.get("REGTRAIN_FULL_SOD"), reason="the full demo takes minutes; set REGTRAIN_FULL_SOD=1"
)
def test_full_sod_demo_reaches_the_acceptance_numbers(out_root, capsys):
    assert main.main(["--config", "configs/sod_shapes.yaml", f"experiment.output_root={out_root}"]) == 0
    metrics = printed_metrics(capsys.readouterr().out)
    assert metrics["mae"] <= 0.05 and metrics["max_f"] >= 0.90
