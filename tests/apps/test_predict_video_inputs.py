"""--mode predict with a video network: frames of another size than it was trained at are refused in one
line naming both sizes and the fix; an unreadable frame follows data.args.on_bad_sample."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PIL import Image

import main
from tests.apps.test_predict import read_csv
from tests.fixtures.outputs import one_error
from utils.data.datasets.moving_shapes import export_frame_folders

# 10 frames, clips of 6, 2 clips per video: clip 0 reads frames 1-6, clip 1 frames 3-8 (0-based)
ARGS = "data.args={clip_len: 6, num_clips: 2}"


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("video_inputs")
    data, out = base / "data", base / "output"
    export_frame_folders(str(data), videos={"train": 6, "val": 3, "test": 3}, num_frames=10, size=16, noise=0.05)
    assert (
        main.main(
            [
                f"experiment.output_root={out}",
                "experiment.name=v",
                "threads=1",
                "data.name=video_frames_folder",
                f"data.root={data}",
                ARGS,
                "data.batch_size=4",
                "model.name=video_classifier",
                "model.args={num_classes: 6, backbone: small_3d_cnn, backbone_args: {widths: [4, 8]}}",
                "model.input_size=[3, 6, 16, 16]",
                "eval.metric=video",
                "eval.monitor=video_top1",
                "train.iterations=2",
            ]
        )
        == 0
    )
    return {"checkpoint": str(out / "v" / "run_001" / "checkpoints" / "best.pt"), "data": data}


def videos(video: dict, target: Path, count: int) -> list:
    folders = sorted(p for p in (video["data"] / "test").glob("*/*") if p.is_dir())[:count]
    for folder in folders:
        shutil.copytree(folder, target / folder.name)
    return [target / folder.name for folder in folders]


def predict(video: dict, spec: Path, out: Path, *extra: str) -> int:
    return main.main(
        ["--mode", "predict", "--checkpoint", video["checkpoint"], "--input", str(spec), "--output", str(out), *extra]
    )


def test_frames_of_another_size_are_refused_naming_both_sizes_and_the_fix(video, tmp_path, capsys):
    (folder,) = videos(video, tmp_path / "in", 1)
    for frame in folder.iterdir():
        Image.open(frame).resize((8, 8)).save(frame)
    assert predict(video, tmp_path / "in", tmp_path / "small") == 2
    error = one_error(capsys)
    assert (
        f"input '{folder}' reaches the network at 8x8" in error
        and "trained at 16x16 (model.input_size=[3, 6, 16, 16])" in error
    ), error
    fix = error.split("let predict resize them: ")[1]
    assert predict(video, tmp_path / "in", tmp_path / "resized", fix) == 0
    assert [r["clips"] for r in read_csv(tmp_path / "resized" / "predictions.csv")] == ["2"]


def test_an_unreadable_frame_stops_or_skips_its_clips(video, tmp_path, capsys):
    one_bad_clip, no_good_clip, fine = videos(video, tmp_path / "in", 3)
    (one_bad_clip / "00002.png").write_bytes(b"broken")  # frame 1: clip 0 only
    (no_good_clip / "00005.png").write_bytes(b"broken")  # frame 4: both clips
    assert predict(video, tmp_path / "in", tmp_path / "stop") == 2
    error = one_error(capsys)
    assert "00002.png" in error and "data.args.on_bad_sample=skip" in error, error
    assert predict(video, tmp_path / "in", tmp_path / "skip", "data.args.on_bad_sample=skip") == 0
    rows = read_csv(tmp_path / "skip" / "predictions.csv")
    assert [(r["path"], r["clips"]) for r in rows] == [(str(one_bad_clip), "1"), (str(fine), "2")]
    assert "predict: inputs=3 predicted=2" in capsys.readouterr().out
