"""Synthetic clips whose class is in the motion only: a shape moving or rotating on noise.

Every video is rendered from a seed made of (``seed``, split, index), so the
data is deterministic and offline. The scene wraps around the frame edges (a
torus): a shape's position and orientation are uniform in every frame for every
class, and shape, size, colours and speed are drawn independently of the class,
so a single frame says nothing about the class; the order of frames does.
``export_frame_folders`` writes the same videos as ``<root>/<split>/<class>/<video>/<frame>.png``
(the ``video_frames_folder`` layout; ``python -m utils.data.datasets.moving_shapes --help``).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Annotated, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from utils.config.arguments import Count, at_least
from utils.data.clips import ClipDataset
from utils.errors import ConfigError
from utils.registry import DATASETS

# Sorted by name, so a frame-folder copy (classes = sorted folder names) keeps the label indices.
CLASSES = ("clockwise", "counterclockwise", "down", "left", "right", "up")
SPLIT_CODES = {"train": 0, "val": 1, "test": 2}
DIRECTIONS = {"down": (0, 1), "left": (-1, 0), "right": (1, 0), "up": (0, -1)}  # (dx, dy); y points down


def render_video(seed: Sequence[int], label: int, num_frames: int, size: int, noise: float) -> np.ndarray:
    """One video as uint8 ``[T, 3, size, size]``; the same ``seed`` gives the same pixels."""
    rng = np.random.default_rng(list(seed))
    kind = rng.integers(3)  # ellipse, rectangle, triangle
    half_len = rng.uniform(0.22, 0.32) * size
    half_wid = half_len * rng.uniform(0.4, 0.55)
    cx, cy, theta0 = rng.uniform(0, size), rng.uniform(0, size), rng.uniform(0, 2 * math.pi)
    speed, omega = rng.uniform(0.05, 0.08) * size, rng.uniform(0.2, 0.35)  # pixels and radians per frame
    background = rng.uniform(0.0, 0.4, size=3)
    foreground = np.clip(background + rng.uniform(0.4, 0.6), 0, 1)  # brighter than the background

    t = np.arange(num_frames, dtype=np.float64)[:, None, None]
    name = CLASSES[label]
    if name in DIRECTIONS:
        dx, dy = DIRECTIONS[name]
        cx_t, cy_t, theta = cx + dx * speed * t, cy + dy * speed * t, theta0 + 0 * t
    else:  # growing angles turn clockwise on screen, where y points down
        sign = 1.0 if name == "clockwise" else -1.0
        cx_t, cy_t, theta = cx + 0 * t, cy + 0 * t, theta0 + sign * omega * t
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64) + 0.5
    wrap = lambda d: (d + size / 2) % size - size / 2  # noqa: E731  shortest offset on the torus
    ox, oy = wrap(xx[None] - cx_t), wrap(yy[None] - cy_t)
    u = np.cos(theta) * ox + np.sin(theta) * oy  # along the shape's long axis
    v = -np.sin(theta) * ox + np.cos(theta) * oy
    if kind == 0:
        mask = (u / half_len) ** 2 + (v / half_wid) ** 2 <= 1.0
    elif kind == 1:
        mask = (np.abs(u) <= half_len) & (np.abs(v) <= half_wid)
    else:  # isosceles triangle, apex at u = +half_len
        mask = (u >= -half_len) & (u <= half_len) & (np.abs(v) <= half_wid * (half_len - u) / (2 * half_len))
    mask = mask[:, None].astype(np.float64)  # [T, 1, H, W]
    frames = background[None, :, None, None] * (1 - mask) + foreground[None, :, None, None] * mask
    frames = frames + noise * rng.standard_normal(frames.shape)
    return np.round(np.clip(frames, 0, 1) * 255).astype(np.uint8)


@DATASETS.register("moving_shapes")
class MovingShapes(ClipDataset):
    """Six classes (four directions of motion, two of rotation), balanced, rendered once and kept in memory."""

    classes = CLASSES
    num_classes = len(CLASSES)

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        videos: Optional[Dict[str, int]] = None,
        num_frames: Count = 12,
        size: Count = 16,
        noise: Annotated[float, at_least(0)] = 0.05,
        seed: Annotated[int, at_least(0)] = 0,
        clip_len: Count = 6,
        frame_stride: Count = 1,
        num_clips: Count = 3,
        pad_short: bool = False,
    ) -> None:
        super().__init__(split, transform, clip_len, frame_stride, num_clips, pad_short)
        counts = {"train": 600, "val": 120, "test": 240, **(videos or {})}
        if split not in SPLIT_CODES:
            raise ConfigError(f"moving_shapes has splits {tuple(SPLIT_CODES)}, got '{split}'")
        n = counts[split]
        labels = [i % self.num_classes for i in range(n)]
        self.frames = [
            render_video((seed, SPLIT_CODES[split], i), labels[i], num_frames, size, noise) for i in range(n)
        ]
        names = [f"moving_shapes/{split}/{CLASSES[label]}/video_{i:05d}" for i, label in enumerate(labels)]
        self.set_videos(labels, [num_frames] * n, names)

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        return torch.from_numpy(self.frames[video][indices])


def export_frame_folders(
    root: str, splits: Sequence[str] = ("train", "val", "test"), image_format: str = "png", **kwargs
) -> Dict[str, int]:
    """Write the dataset as ``<root>/<split>/<class>/<video>/<frame>.<format>``; returns videos per split.

    ``kwargs`` are MovingShapes arguments (``videos``, ``num_frames``, ``size``, ``noise``, ``seed``).
    PNG is lossless (the folder reads back to the same pixels); JPG is what extracted datasets use.
    """
    from PIL import Image

    written = {}
    for split in splits:
        data = MovingShapes(split=split, clip_len=1, **kwargs)  # clip settings do not matter here
        for video, frames in enumerate(data.frames):
            folder = Path(root) / split / CLASSES[data.labels[video]] / f"video_{video:05d}"
            folder.mkdir(parents=True, exist_ok=True)
            for t, frame in enumerate(frames):
                Image.fromarray(frame.transpose(1, 2, 0)).save(folder / f"{t + 1:05d}.{image_format}")
        written[split] = data.num_videos
    return written


def main(argv: Optional[List[str]] = None) -> None:
    """``python -m utils.data.datasets.moving_shapes data/moving_shapes [--format jpg]`` writes
    ``<root>/{train,val,test}/<class>/<video>/<frame>.png``, which
    ``data.name=video_frames_folder data.root=<root>`` reads back."""
    parser = argparse.ArgumentParser(
        description="Write moving_shapes videos as frame folders (the video_frames_folder layout)."
    )
    parser.add_argument("root", help="output folder")
    parser.add_argument(
        "--format", choices=("png", "jpg"), default="png", help="png is lossless; jpg like extracted datasets"
    )
    parser.add_argument("--videos", type=int, nargs=3, default=(600, 120, 240), metavar=("TRAIN", "VAL", "TEST"))
    parser.add_argument("--num-frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    videos = dict(zip(("train", "val", "test"), args.videos))
    written = export_frame_folders(
        args.root,
        image_format=args.format,
        videos=videos,
        num_frames=args.num_frames,
        size=args.size,
        noise=args.noise,
        seed=args.seed,
    )
    print(f"wrote {written} videos to {args.root}")


if __name__ == "__main__":
    main()
