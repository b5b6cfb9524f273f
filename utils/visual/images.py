"""Batches of network inputs and outputs as displayable pictures: value range, size, grids, captions.

Everything works on the CPU with numpy and PIL, so a picture costs milliseconds and no
plotting library; tiles are ``(H, W, 3)`` uint8 arrays.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, List, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image, ImageDraw, ImageFont

from utils.tree import tensors_in

BACKGROUND = (255, 255, 255)
INK = (20, 20, 20)


def loader_normalization(loader: Any) -> tuple:
    """``(mean, std)`` the loader normalized its inputs with (``data.mean``/``data.std``), or ``(None, None)``."""
    return getattr(loader, "mean", None), getattr(loader, "std", None)


def class_names(loader: Any) -> Optional[List[str]]:
    """The dataset's class names (its ``classes`` attribute), or None."""
    names = getattr(getattr(loader, "dataset", None), "classes", None)
    return [str(name) for name in names] if names is not None else None


def label_name(names: Optional[Sequence[str]], index: int) -> str:
    return names[index] if names is not None and 0 <= index < len(names) else str(index)


def input_tensor(inputs: Any) -> torch.Tensor:
    """The tensor pictures show of a batch's inputs: the inputs, or their first tensor when they
    are a container (a dict, a namedtuple of views, ...)."""
    return inputs if isinstance(inputs, torch.Tensor) else next(tensors_in(inputs))


def as_images(inputs: Any) -> torch.Tensor:
    """``[B, C, H, W]``; a clip batch ``[B, C, T, H, W]`` gives its middle frames."""
    inputs = input_tensor(inputs)
    return inputs[:, :, inputs.shape[2] // 2] if inputs.dim() == 5 else inputs


def to_display(
    images: torch.Tensor, mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None
) -> torch.Tensor:
    """``[B, C, H, W]`` network inputs as ``[B, 3, H, W]`` floats in [0, 1] on the CPU.

    The loader's normalization is undone when known; otherwise values already in
    [0, 1] stay as they are and any other range is stretched per image.
    """
    x = images.detach().float().cpu()
    if mean is not None and std is not None:
        x = x * torch.tensor(std).view(1, -1, 1, 1) + torch.tensor(mean).view(1, -1, 1, 1)
    elif x.numel() and (x.min() < 0 or x.max() > 1):
        low = x.amin(dim=(1, 2, 3), keepdim=True)
        high = x.amax(dim=(1, 2, 3), keepdim=True)
        x = (x - low) / (high - low).clamp_min(1e-8)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    return x[:, :3].clamp(0, 1)


def to_tiles(images: torch.Tensor, side: int) -> List[np.ndarray]:
    """``[B, 3, H, W]`` floats in [0, 1] as uint8 tiles whose longer side is ``side``.

    Small inputs (8x8 digits, 32x32 scenes) are enlarged with nearest neighbours, so
    their pixels stay visible; larger ones are resized smoothly.
    """
    if images.shape[0] == 0:
        return []
    h, w = images.shape[-2:]
    scale = side / max(h, w)
    size = (max(1, round(h * scale)), max(1, round(w * scale)))
    if size != (h, w):
        mode = "nearest" if scale >= 1 else "bilinear"
        images = F.interpolate(
            images, size=size, mode=mode, **({} if mode == "nearest" else {"align_corners": False, "antialias": True})
        )
    return list((images.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy())


@lru_cache(maxsize=8)
def font(size: int) -> ImageFont.ImageFont:
    """PIL's bundled scalable font (no font files needed on the machine)."""
    return ImageFont.load_default(size=size)


def caption(tile: np.ndarray, lines: Sequence[str], size: int = 12, color: Sequence[int] = INK) -> np.ndarray:
    """``tile`` with ``lines`` of text in a white band below it, widened where a line is longer."""
    band_height = len(lines) * (size + 3) + 4
    width = max([tile.shape[1]] + [int(font(size).getlength(line)) + 4 for line in lines])
    canvas = Image.new("RGB", (width, tile.shape[0] + band_height), BACKGROUND)
    canvas.paste(Image.fromarray(tile), (0, 0))
    draw = ImageDraw.Draw(canvas)
    for i, line in enumerate(lines):
        draw.text((2, tile.shape[0] + 2 + i * (size + 3)), line, fill=tuple(color), font=font(size))
    return np.asarray(canvas)


def text_tile(text: str, width: int, height: int, size: int = 12) -> np.ndarray:
    """A white ``height`` x ``width`` tile with ``text`` centred in it: a row or column heading."""
    canvas = Image.new("RGB", (width, height), BACKGROUND)
    ImageDraw.Draw(canvas).text((width // 2, height // 2), text, fill=INK, font=font(size), anchor="mm")
    return np.asarray(canvas)


def grid(rows: Sequence[Sequence[np.ndarray]], pad: int = 4) -> np.ndarray:
    """Tiles in rows (each row left to right) on a white canvas, ``pad`` pixels apart."""
    heights = [max(tile.shape[0] for tile in row) for row in rows]
    widths = [sum(tile.shape[1] for tile in row) + pad * (len(row) - 1) for row in rows]
    canvas = np.full((sum(heights) + pad * (len(rows) + 1), max(widths) + 2 * pad, 3), 255, dtype=np.uint8)
    y = pad
    for row, height in zip(rows, heights):
        x = pad
        for tile in row:
            canvas[y : y + tile.shape[0], x : x + tile.shape[1]] = tile
            x += tile.shape[1] + pad
        y += height + pad
    return canvas


def chunks(items: Sequence[Any], size: int) -> List[Sequence[Any]]:
    """``items`` in consecutive groups of ``size`` (the last may be shorter)."""
    return [items[i : i + size] for i in range(0, len(items), max(size, 1))]
