"""A confusion matrix as a picture: counts per (true, predicted) class, shaded by each row's share."""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
from PIL import Image, ImageDraw

from utils.visual.images import BACKGROUND, INK, font, label_name

LABELLED = 30  # up to this many classes every cell shows its count and every class its name


def shade(share: np.ndarray) -> np.ndarray:
    """White (0) to dark blue (1) for each value in [0, 1]: ``(..., 3)`` uint8."""
    white, blue = np.array([255.0, 255.0, 255.0]), np.array([8.0, 48.0, 107.0])
    return (white + (blue - white) * np.clip(share, 0, 1)[..., None]).round().astype(np.uint8)


def fit(name: str, width: float, text_font) -> str:
    """``name`` cut to ``width`` pixels (a column is one cell wide; the row label keeps the whole name)."""
    while len(name) > 1 and text_font.getlength(name) > width:
        name = name[:-1]
    return name


def confusion_image(matrix: np.ndarray, names: Optional[Sequence[str]] = None, title: str = "") -> np.ndarray:
    """``matrix[true, predicted]`` counts as an ``(H, W, 3)`` uint8 picture.

    Rows are true classes, columns predicted ones; a cell's shade is its share of
    the row (recall on the diagonal), its text the count. Beyond 30 classes the
    cells shrink and lose their text, so a 1000-class matrix stays a small image.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    n = matrix.shape[0]
    labelled = n <= LABELLED
    cell = 28 if labelled else max(2, 600 // n)
    names = [label_name(names, i) for i in range(n)]
    text = font(11)
    margin = (max(text.getlength(name) for name in names) + 22) if labelled else 24
    left, top = int(margin), 52
    image = Image.new("RGB", (left + n * cell + 8, top + n * cell + 8), BACKGROUND)
    draw = ImageDraw.Draw(image)
    share = matrix / np.maximum(matrix.sum(axis=1, keepdims=True), 1)
    image.paste(Image.fromarray(shade(share).repeat(cell, 0).repeat(cell, 1)), (left, top))
    total = matrix.sum()
    accuracy = np.trace(matrix) / total if total else 0.0
    draw.text((4, 4), f"{title}  accuracy {accuracy:.4f} ({int(total)} samples)".strip(), fill=INK, font=font(12))
    draw.text((left, 22), "predicted", fill=INK, font=text)
    draw.text((4, top - 14), "true", fill=INK, font=text)
    if labelled:
        for i, name in enumerate(names):
            y = top + i * cell + cell // 2
            draw.text((left - 6, y), name, fill=INK, font=text, anchor="rm")
            draw.text(
                (left + i * cell + cell // 2, top - 2), fit(name, cell - 3, text), fill=INK, font=text, anchor="mb"
            )
            for j in range(n):
                if matrix[i, j]:
                    color = (255, 255, 255) if share[i, j] > 0.5 else INK
                    draw.text(
                        (left + j * cell + cell // 2, y), str(int(matrix[i, j])), fill=color, font=text, anchor="mm"
                    )
    return np.asarray(image)
