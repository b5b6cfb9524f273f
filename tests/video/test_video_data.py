"""Clip datasets: synthetic clips, frame folders, clip sampling, transforms and input errors."""

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.data.clips import clip_indices, eval_starts
from utils.data.datasets.moving_shapes import CLASSES, export_frame_folders
from utils.errors import ConfigError, DataError
from utils.registry import DATASETS

SMALL = {"videos": {"train": 12, "val": 6, "test": 7}, "num_frames": 10, "size": 16, "clip_len": 4, "num_clips": 3}


def write_video(folder: Path, num_frames: int, size: int = 8, names: str = "img_{}.jpg") -> None:
    """Frames whose pixel value is the frame number (so a clip shows which frames it took)."""
    folder.mkdir(parents=True)
    for t in range(num_frames):
        Image.fromarray(np.full((size, size, 3), 10 * t, dtype=np.uint8)).save(folder / names.format(t))


def frame_numbers(clip: torch.Tensor) -> list:
    """Frame numbers of a clip from write_video (PNG or JPEG of a flat image)."""
    return [round(float(v) * 255 / 10) for v in clip[0].mean(dim=(1, 2))]


def test_moving_shapes_is_deterministic_balanced_and_seed_dependent():
    a = DATASETS.build("moving_shapes", split="test", **SMALL)
    b = DATASETS.build("moving_shapes", split="test", **SMALL)
    other = DATASETS.build("moving_shapes", split="test", seed=1, **SMALL)
    assert len(a) == 7 * 3 and a.num_videos == 7
    assert all(np.array_equal(x, y) for x, y in zip(a.frames, b.frames))
    assert not any(np.array_equal(x, y) for x, y in zip(a.frames, other.frames))
    train = DATASETS.build("moving_shapes", split="train", **SMALL)
    assert np.bincount(train.labels).tolist() == [2] * len(CLASSES)
    assert not np.array_equal(train.frames[0], a.frames[0])  # splits come from different seeds
    clip, target = a[4]
    assert clip.shape == (3, 4, 16, 16) and clip.dtype == torch.float32 and 0 <= clip.min() <= clip.max() <= 1
    assert target == {"label": a.labels[1], "video": 1}


def test_moving_shapes_single_frames_are_alike_across_classes():
    # The class is not in one frame: shape area and brightness statistics do not depend on it.
    data = DATASETS.build("moving_shapes", split="train", videos={"train": 240}, num_frames=4, size=32, clip_len=4)
    frames = torch.stack([torch.from_numpy(f[0]).float() for f in data.frames])
    labels = torch.tensor(data.labels)
    per_class = torch.stack([frames[labels == c].mean(dim=0).mean(dim=0) for c in range(len(CLASSES))])  # [6, H, W]
    # where the shape is: mean image per class is flat (uniform position on the torus)
    assert (per_class.std(dim=(1, 2)) < 12).all()


def test_moving_shapes_motion_goes_the_labelled_way():
    data = DATASETS.build(
        "moving_shapes", split="train", videos={"train": 6}, num_frames=3, size=32, noise=0.0, clip_len=3
    )
    for video, label in enumerate(data.labels):
        f = torch.from_numpy(data.frames[video]).float()
        name = CLASSES[label]
        if name in ("left", "right", "up", "down"):
            axis = 2 if name in ("left", "right") else 1  # W or H of [3, H, W]
            # the cross-correlation of frames 0 and 2 peaks at the shift of the motion
            shifts = {s: -(torch.roll(f[0], s, dims=axis) - f[2]).abs().sum().item() for s in range(-5, 6)}
            best = max(shifts, key=shifts.get)
            assert (best > 0) == (name in ("right", "down")), (name, best)
        else:
            assert not torch.equal(f[0], f[2])


def test_training_clips_jitter_and_eval_clips_are_uniform_with_video_index(tmp_path):
    write_video(tmp_path / "train" / "a" / "v0", 20)
    write_video(tmp_path / "test" / "a" / "v0", 20)
    write_video(tmp_path / "test" / "b" / "v1", 9, names="frame{}.png")  # unpadded numbers: natural order
    train = DATASETS.build("video_frames_folder", split="train", root=str(tmp_path), clip_len=4, frame_stride=2)
    starts = {frame_numbers(train[0][0])[0] for _ in range(40)}
    assert len(starts) > 3 and min(starts) >= 0 and max(starts) <= 20 - 7
    frames = frame_numbers(train[0][0])
    assert frames == [frames[0] + 2 * i for i in range(4)]

    test = DATASETS.build(
        "video_frames_folder", split="test", root=str(tmp_path), clip_len=4, frame_stride=2, num_clips=3
    )
    assert test.classes == ["a", "b"] and len(test) == 6
    firsts = [frame_numbers(test[i][0])[0] for i in range(6)]
    assert firsts[:3] == eval_starts(20, 7, 3) == [2, 6, 10]
    assert firsts[3:] == [0, 1, 1]  # 9 frames: starts 0..2
    assert [test[i][1] for i in (2, 3)] == [{"label": 0, "video": 0}, {"label": 1, "video": 1}]
    assert frame_numbers(test[3][0]) == [0, 2, 4, 6]


def test_spatial_transform_is_the_same_for_every_frame():
    spec = [{"name": "RandomResizedCrop", "size": 12, "scale": [0.2, 0.5]}, {"name": "RandomHorizontalFlip"}]
    data = build_dataset(DataConfig(name="moving_shapes", args={**SMALL, "noise": 0.0}, train_transforms=spec), "train")
    static = torch.from_numpy(data.frames[0][:1]).repeat(10, 1, 1, 1)  # a video of one repeated frame
    data.frames[0] = static.numpy()
    clip, _ = data[0]
    assert clip.shape == (3, 4, 12, 12)
    assert all(torch.equal(clip[:, 0], clip[:, t]) for t in range(4))


def test_split_files_and_class_order(tmp_path):
    for cls, video in (("Walk", "v_Walk_g01"), ("Run", "v_Run_g01"), ("Run", "v_Run_g02")):
        write_video(tmp_path / cls / video, 5)
    lists = tmp_path / "lists"
    lists.mkdir()
    (lists / "train.txt").write_text("Run/v_Run_g01.avi 1\nWalk/v_Walk_g01.avi 2\n")
    (lists / "test.txt").write_text("# comment\n\nRun/v_Run_g02.avi\n")
    files = {"train": "lists/train.txt", "test": "lists/test.txt"}
    test = DATASETS.build(
        "video_frames_folder", split="test", root=str(tmp_path), split_files=files, clip_len=2, num_clips=1
    )
    assert test.classes == ["Run", "Walk"] and test.labels.tolist() == [0]  # classes of all lists, not only this one
    with pytest.raises(ConfigError, match="no entry for split 'val'"):
        DATASETS.build("video_frames_folder", split="val", root=str(tmp_path), split_files=files)
    (lists / "bad.txt").write_text("Run/missing.avi\n")
    with pytest.raises(DataError, match="missing"):
        DATASETS.build("video_frames_folder", split="test", root=str(tmp_path), split_files={"test": "lists/bad.txt"})


def test_empty_and_short_videos_are_named_with_the_fix(tmp_path):
    write_video(tmp_path / "test" / "a" / "ok", 8)
    (tmp_path / "test" / "a" / "empty").mkdir()
    with pytest.raises(DataError, match=r"video '.*empty' has no frames"):
        DATASETS.build("video_frames_folder", split="test", root=str(tmp_path), clip_len=4)
    (tmp_path / "test" / "a" / "empty").rmdir()
    write_video(tmp_path / "test" / "a" / "short", 5)
    with pytest.raises(DataError, match=r"short' has 5 frames, but a clip spans 7 .*lower data.args.clip_len"):
        DATASETS.build("video_frames_folder", split="test", root=str(tmp_path), clip_len=4, frame_stride=2)
    padded = DATASETS.build(
        "video_frames_folder", split="test", root=str(tmp_path), clip_len=4, frame_stride=2, pad_short=True, num_clips=1
    )
    assert frame_numbers(padded[1][0]) == clip_indices(0, 4, 2, 5) == [0, 2, 4, 4]
    with pytest.raises(DataError, match="split_files"):
        DATASETS.build("video_frames_folder", split="val", root=str(tmp_path))


def test_exported_frame_folders_read_back_as_the_same_clips(tmp_path):
    args = {"videos": {"train": 0, "val": 0, "test": 8}, "num_frames": 6, "size": 16}
    assert export_frame_folders(str(tmp_path), splits=("test",), **args) == {"test": 8}
    memory = DATASETS.build("moving_shapes", split="test", clip_len=4, num_clips=2, **args)
    disk = DATASETS.build("video_frames_folder", split="test", root=str(tmp_path), clip_len=4, num_clips=2)
    assert disk.classes == list(CLASSES) and sorted(disk.labels) == sorted(memory.labels)
    for video in range(disk.num_videos):
        folder = disk.folder(video)
        source = int(folder.name.split("_")[-1])
        for k in range(2):
            x_disk, y_disk = disk[video * 2 + k]
            x_mem, y_mem = memory[source * 2 + k]
            assert torch.equal(x_disk, x_mem) and y_disk["label"] == y_mem["label"]
