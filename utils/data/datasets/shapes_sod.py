"""Synthetic salient object detection: saturated shapes on a textured background, exact masks.

Every scene is drawn from its own random stream ``(seed, split, index)``, so any
index is reproducible on its own and the splits never share a scene. Scenes have
varying original sizes, so evaluation exercises resizing predictions back to the
ground truth's size. Write a split to disk in the ``image_mask_folder`` layout:

    python -m utils.data.datasets.shapes_sod --out data/shapes --split test --count 101
"""

from __future__ import annotations

import argparse
import colorsys
from pathlib import Path
from typing import Annotated, Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import Dataset

from utils.config.arguments import Count, ImageSize, Scales, at_least
from utils.data.images import from_uint8
from utils.data.mask_encoding import mask_values
from utils.data.masks import MaskBatchCollate, PairPipeline
from utils.errors import ConfigError
from utils.registry import DATASETS

SPLIT_IDS = {"train": 0, "val": 1, "test": 2}
DEFAULT_COUNTS = {"train": 1000, "val": 64, "test": 101}


def _background(rng: np.random.Generator, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """Low-saturation colour with gratings and noise: texture without salient structure."""
    h, w = ys.shape
    grey = rng.uniform(0.3, 0.7)
    image = np.full((h, w, 3), grey) + rng.uniform(-0.08, 0.08, 3)
    for _ in range(3):
        freq = rng.uniform(2.0, 10.0)
        angle = rng.uniform(0, np.pi)
        wave = np.sin(2 * np.pi * freq * (np.cos(angle) * xs + np.sin(angle) * ys) + rng.uniform(0, 2 * np.pi))
        image += rng.uniform(0.03, 0.1) * wave[..., None] * rng.uniform(0.5, 1.0, 3)
    image += rng.normal(0.0, 0.03, (h, w, 3))
    return image


def _shape_region(rng: np.random.Generator, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
    """A boolean region: rotated ellipse, rotated rectangle or star-shaped polygon."""
    cy, cx = rng.uniform(0.2, 0.8, 2)
    ry, rx = rng.uniform(0.1, 0.28, 2)
    theta = rng.uniform(0, np.pi)
    u = (xs - cx) * np.cos(theta) + (ys - cy) * np.sin(theta)
    v = -(xs - cx) * np.sin(theta) + (ys - cy) * np.cos(theta)
    kind = rng.integers(3)
    if kind == 0:
        return (u / rx) ** 2 + (v / ry) ** 2 <= 1.0
    if kind == 1:
        return (np.abs(u) <= rx) & (np.abs(v) <= ry)
    n = int(rng.integers(3, 7))
    # evenly spread corners with jitter: no slivers, always a star-shaped (simple) polygon
    angles = rng.uniform(0, 2 * np.pi) + (np.arange(n) + rng.uniform(-0.3, 0.3, n)) * 2 * np.pi / n
    radii = rng.uniform(0.6, 1.0, n) * max(rx, ry)
    px, py = cx + radii * np.cos(angles), cy + radii * np.sin(angles)
    inside = np.zeros(xs.shape, dtype=bool)
    for i in range(n):  # even-odd rule over the polygon's edges
        x0, y0, x1, y1 = px[i], py[i], px[(i + 1) % n], py[(i + 1) % n]
        crosses = (y0 > ys) != (y1 > ys)
        x_at = x0 + (ys - y0) * (x1 - x0) / (y1 - y0 + 1e-12)
        inside ^= crosses & (xs < x_at)
    return inside


def render_scene(
    seed: int, split: str, index: int, min_side: int = 48, max_side: int = 80, max_shapes: int = 3
) -> Tuple[np.ndarray, np.ndarray]:
    """``(H, W, 3)`` uint8 image and its exact ``(H, W)`` uint8 mask (0 or 255) for one index."""
    if split not in SPLIT_IDS:
        raise ConfigError(f"shapes_sod has splits {tuple(SPLIT_IDS)}, got '{split}'")
    rng = np.random.default_rng([seed, SPLIT_IDS[split], index])
    h, w = (int(s) for s in rng.integers(min_side, max_side + 1, 2))
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    ys, xs = (ys + 0.5) / h, (xs + 0.5) / w  # pixel centres in [0, 1]
    image = _background(rng, ys, xs)
    mask = np.zeros((h, w), dtype=bool)
    for _ in range(int(rng.integers(1, max_shapes + 1))):
        region = _shape_region(rng, ys, xs)
        colour = np.array(colorsys.hsv_to_rgb(rng.uniform(), rng.uniform(0.75, 1.0), rng.uniform(0.7, 1.0)))
        shade = 1.0 + 0.15 * np.sin(2 * np.pi * rng.uniform(3, 8) * (xs + ys))[..., None]
        image = np.where(region[..., None], colour * shade, image)
        mask |= region
    image = (np.clip(image, 0.0, 1.0) * 255.0).round().astype(np.uint8)
    return image, mask.astype(np.uint8) * 255


@DATASETS.register("shapes_sod")
class ShapesSOD(Dataset):
    """``counts`` scenes per split (default train 1000, val 64, test 101), generated offline.

    Items as in ``utils/data/masks.py``: resized to ``size``, originals kept for
    the val and test splits. ``root`` is unused (nothing is read from disk).
    """

    SIZING = ("size", "last")  # --mode predict: resized to data.args.size after the eval transforms

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        size: Optional[ImageSize] = 64,
        counts: Optional[Dict[str, int]] = None,
        seed: Annotated[int, at_least(0)] = 0,
        min_side: Count = 48,
        max_side: Count = 80,
        max_shapes: Count = 3,
        multi_scale: Optional[Scales] = None,
        size_divisor: Count = 8,
    ) -> None:
        if split not in SPLIT_IDS:
            raise ConfigError(f"shapes_sod has splits {tuple(SPLIT_IDS)}, got '{split}'")
        if not 8 <= min_side <= max_side:
            raise ConfigError(f"shapes_sod needs 8 <= min_side <= max_side, got {min_side}, {max_side}")
        self.split = split
        self.count = int({**DEFAULT_COUNTS, **(counts or {})}[split])
        self.scene_args = {"seed": seed, "min_side": min_side, "max_side": max_side, "max_shapes": max_shapes}
        self.pipeline = PairPipeline(size, transform, keep_original=split != "train")
        self.collate_fn = MaskBatchCollate(multi_scale if split == "train" else None, size_divisor)
        self._cache: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}  # scenes are small; drawing them is not free

    def __len__(self) -> int:
        return self.count

    def name(self, index: int) -> str:
        return f"{self.split}_{index:05d}"

    def scene(self, index: int) -> Tuple[np.ndarray, np.ndarray]:
        if not 0 <= index < self.count:
            raise IndexError(f"index {index} is outside shapes_sod '{self.split}' of {self.count} scenes")
        if index not in self._cache:
            self._cache[index] = render_scene(split=self.split, index=index, **self.scene_args)
        return self._cache[index]

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, Dict[str, Any]]:
        image, mask = self.scene(index)
        name = self.name(index)
        return self.pipeline(from_uint8(image), mask_values(mask, name), name)  # as image_mask_folder reads the PNGs


def write_split(
    out: Path,
    split: str,
    count: int,
    seed: int = 0,
    image_dir: str = "Image",
    mask_dir: str = "Mask",
    **scene_args: Any,
) -> Path:
    """Write ``count`` scenes as PNGs to ``out/<split>/{image_dir, mask_dir}``; returns the split folder."""
    from PIL import Image

    base = Path(out) / split
    (base / image_dir).mkdir(parents=True, exist_ok=True)
    (base / mask_dir).mkdir(parents=True, exist_ok=True)
    for index in range(count):
        image, mask = render_scene(seed, split, index, **scene_args)
        name = f"{split}_{index:05d}.png"
        Image.fromarray(image).save(base / image_dir / name)
        Image.fromarray(mask).save(base / mask_dir / name)
    return base


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Write shapes_sod scenes in the image_mask_folder layout.")
    parser.add_argument("--out", required=True, help="root folder (gets <split>/Image and <split>/Mask)")
    parser.add_argument("--split", choices=tuple(SPLIT_IDS), nargs="+", default=["train", "val", "test"])
    parser.add_argument("--count", type=int, help="scenes per split (default: the dataset's count for that split)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for split in args.split:
        folder = write_split(Path(args.out), split, args.count or DEFAULT_COUNTS[split], args.seed)
        print(f"wrote {args.count or DEFAULT_COUNTS[split]} scenes to {folder}")


if __name__ == "__main__":
    main()
