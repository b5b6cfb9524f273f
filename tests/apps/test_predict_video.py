"""--mode predict with a video network: one row per frame folder, scoring as --mode test's video top-1."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import main
from tests.apps.test_predict import read_csv
from tests.fixtures.dist_utils import run, torchrun
from utils.data.datasets.moving_shapes import export_frame_folders

NUM_CLIPS = 2


@pytest.fixture(scope="module")
def video_checkpoint(tmp_path_factory) -> dict:
    """A small 3D CNN trained for 2 epochs on moving_shapes written as PNG frame folders."""
    base = tmp_path_factory.mktemp("video_predict")
    data, out = base / "data", base / "output"
    export_frame_folders(str(data), videos={"train": 24, "val": 6, "test": 7}, num_frames=10, size=16, noise=0.05)
    args = [
        f"experiment.output_root={out}",
        "experiment.name=v",
        "threads=1",
        "data.name=video_frames_folder",
        f"data.root={data}",
        f"data.args={{clip_len: 6, num_clips: {NUM_CLIPS}}}",
        "data.batch_size=8",
        "model.name=video_classifier",
        "model.args={num_classes: 6, backbone: small_3d_cnn, backbone_args: {widths: [4, 8]}}",
        "model.input_size=[3, 6, 16, 16]",
        "eval.metric=video",
        "eval.monitor=video_top1",
        "train.epochs=2",
    ]
    assert main.main(args) == 0
    return {"checkpoint": str(out / "v" / "run_001" / "checkpoints" / "best.pt"), "data": data, "out": out}


@pytest.mark.slow
def test_video_predictions_score_the_test_modes_video_top1_on_one_and_two_ranks(video_checkpoint, tmp_path, capsys):
    checkpoint, folder = video_checkpoint["checkpoint"], video_checkpoint["data"] / "test"
    assert main.main(["--mode", "test", "--checkpoint", checkpoint]) == 0
    top1 = float(re.search(r"video_top1=([\d.]+)", capsys.readouterr().out).group(1))

    assert (
        main.main(
            ["--mode", "predict", "--checkpoint", checkpoint, "--input", str(folder), "--output", str(tmp_path / "one")]
        )
        == 0
    )
    assert "predict: inputs=7 predicted=7" in capsys.readouterr().out
    rows = read_csv(tmp_path / "one" / "predictions.csv")
    # one row per video folder
    assert [r["path"] for r in rows] == sorted(str(p) for p in folder.glob("*/*") if p.is_dir())
    assert {r["clips"] for r in rows} == {str(NUM_CLIPS)}
    correct = sum(Path(r["path"]).parent.name == r["prediction"] for r in rows)
    assert f"{correct / len(rows):.4f}" == f"{top1:.4f}"

    # 2 ranks: 14 clips split 7 + 7, so the clips of some videos are on both ranks
    two = run(
        torchrun(
            2,
            "--mode",
            "predict",
            "--checkpoint",
            checkpoint,
            "--input",
            str(folder / "*" / "video_*"),
            "--output",
            str(tmp_path / "two"),
        ),
        timeout=180,
    )
    assert two.returncode == 0, two.stderr[-2000:]
    rows2 = read_csv(tmp_path / "two" / "predictions.csv")
    assert [(r["path"], r["prediction"], r["top2_class"], r["clips"]) for r in rows2] == [
        (r["path"], r["prediction"], r["top2_class"], r["clips"]) for r in rows
    ]
    assert max(abs(float(a["score"]) - float(b["score"])) for a, b in zip(rows, rows2)) < 1e-5


def test_a_video_file_is_one_line_naming_the_frame_extraction(video_checkpoint, tmp_path, capsys):
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(b"\x00" * 64)
    assert (
        main.main(
            [
                "--mode",
                "predict",
                "--checkpoint",
                video_checkpoint["checkpoint"],
                "--input",
                str(clip),
                "--output",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    (err,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
    assert "ffmpeg -i" in err and "clip.mp4" in err
    assert (
        main.main(
            [
                "--mode",
                "predict",
                "--checkpoint",
                video_checkpoint["checkpoint"],
                "--input",
                str(tmp_path),
                "--output",
                str(tmp_path / "out2"),
            ]
        )
        == 2
    )
    assert "holds no folders of frames" in capsys.readouterr().err


@pytest.mark.slow
def test_a_packed_copy_of_frame_folders_tests_and_predicts_as_the_folders(video_checkpoint, tmp_path, capsys):
    checkpoint, data, packed = video_checkpoint["checkpoint"], video_checkpoint["data"], tmp_path / "packed"
    clips = f"data.args={{clip_len: 6, num_clips: {NUM_CLIPS}}}"
    pack = ["--mode", "pack", "--output", str(packed), "data.name=video_frames_folder", f"data.root={data}", clips]
    assert main.main(pack) == 0
    lines = []
    for source in ([], ["data.name=shards", f"data.root={packed}"]):
        capsys.readouterr()
        assert main.main(["--mode", "test", "--checkpoint", checkpoint, *source]) == 0
        lines.append(next(line for line in capsys.readouterr().out.splitlines() if line.startswith("test:")))
    assert lines[0] == lines[1] and "video_top1=" in lines[0]

    rows = {}
    for name, spec in (("folders", data / "test"), ("shards", packed / "test")):
        out = tmp_path / name
        assert (
            main.main(["--mode", "predict", "--checkpoint", checkpoint, "--input", str(spec), "--output", str(out)])
            == 0
        )
        rows[name] = read_csv(out / "predictions.csv")
    assert [r["path"] for r in rows["shards"]] == [
        f"{packed / 'test'}:{Path(r['path']).relative_to(data)}" for r in rows["folders"]
    ]
    drop_path = [{k: v for k, v in r.items() if k != "path"} for r in rows["folders"]]
    assert [{k: v for k, v in r.items() if k != "path"} for r in rows["shards"]] == drop_path
