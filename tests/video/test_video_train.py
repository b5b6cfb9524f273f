"""Video configs end to end through main.py, shortened (the full runs are in the README)."""

import numpy as np
import pytest
import torch
from PIL import Image

import main
from tests.conftest import ROOT
from tests.fixtures.metrics_rows import rows
from utils.config.load import load_config
from utils.data import build_dataset
from utils.errors import ConfigError

TINY = [
    "data.args.videos={train: 24, val: 6, test: 7}",
    "data.args.num_frames=10",
    "data.batch_size=8",
    "train.epochs=2",
]


@pytest.mark.parametrize(
    "config, model_override",
    [
        ("video_moving_shapes.yaml", "model.args.backbone_args={widths: [4, 8]}"),
        ("video_moving_shapes_single_frame.yaml", "model.args.backbone_args={in_channels: 3, widths: [4, 8]}"),
    ],
)
def test_video_config_trains_and_test_mode_reproduces_it(out_root, capsys, config, model_override):
    args = [
        "--config",
        str(ROOT / "configs" / config),
        f"experiment.output_root={out_root}",
        "experiment.name=v",
        model_override,
        *TINY,
    ]
    torch.set_num_threads(2)
    assert main.main(args) == 0
    assert torch.get_num_threads() == 1  # the configs' `threads: 1`
    printed = capsys.readouterr().out
    run = out_root / "v" / "latest"
    history = rows(run / "metrics.jsonl")
    assert [r["split"] for r in history] == ["val", "val", "test"]
    test_row = history[-1]
    assert test_row["videos"] == 7.0 and {"clip_top1", "clip_top5", "video_top1", "loss"} <= set(test_row)
    assert f"video_top1={test_row['video_top1']:.4f}" in printed
    # 4 clips of 4 different videos as strips of their 6 frames (64 px, captioned), after each validation
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"), size_guidance={"images": 0})
    acc.Reload()
    strips = acc.Images("val/clips")
    assert [e.step for e in strips] == [3, 6] and {(e.width, e.height) for e in strips} == {
        (6 * 64 + 5 + 2 + 8, 4 * (66 + 18) + 5 * 4)
    }
    assert {"val/confusion_matrix", "test/confusion_matrix"} <= set(acc.Tags()["images"])
    assert main.main(["--mode", "test", "--checkpoint", str(run / "checkpoints" / "best.pt")]) == 0
    assert rows(out_root / "v" / "test_001" / "metrics.jsonl")[-1]["video_top1"] == test_row["video_top1"]


def test_ucf101_config_reads_frame_folders_into_16x112x112_clips(tmp_path):
    for cls, video, frames in (("Run", "v_Run_g01_c01", 40), ("Walk", "v_Walk_g01_c01", 20)):
        folder = tmp_path / cls / video
        folder.mkdir(parents=True)
        for t in range(frames):
            Image.fromarray(np.zeros((120, 160, 3), dtype=np.uint8)).save(folder / f"{t + 1:05d}.jpg")
    lists = tmp_path / "ucfTrainTestlist"
    lists.mkdir()
    (lists / "trainlist01.txt").write_text("Run/v_Run_g01_c01.avi 1\nWalk/v_Walk_g01_c01.avi 2\n")
    (lists / "testlist01.txt").write_text("Walk/v_Walk_g01_c01.avi\n")
    cfg = load_config(ROOT / "configs" / "r2plus1d_ucf101.yaml", [f"data.root={tmp_path}"])
    train, test = build_dataset(cfg.data, "train"), build_dataset(cfg.data, "test")
    clip, target = train[1]
    assert clip.shape == (3, 16, 112, 112) and target == {"label": 1, "video": 1}
    assert len(test) == 10 and test[9][1] == {"label": 1, "video": 0}  # 10 clips of the 20-frame (padded) video
    assert torch.isfinite(test[0][0]).all()


def test_threads_must_be_positive():
    with pytest.raises(ConfigError, match="'threads' must be >= 1"):
        load_config(overrides=["threads=0"])
