"""A video's frame folder as every reader of one lists it: the image files in it (hidden and debris names
left out), sorted by the numbers in their names (``img_2`` before ``img_10``), and a clip of them read as
stored (``utils/data/images.py``)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import List

import torch

from utils.data.folders import visible
from utils.data.images import read_image

EXTENSIONS = (".jpg", ".jpeg", ".png")


def natural_key(name: str) -> List:
    """``frame10.jpg`` sorts after ``frame9.jpg``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def list_frames(folder: Path) -> List[str]:
    """The image file names in ``folder`` in frame order."""
    with os.scandir(folder) as entries:
        names = [e.name for e in entries if e.is_file() and e.name.lower().endswith(EXTENSIONS) and visible(e.name)]
    return sorted(names, key=natural_key)


def read_clip(folder: Path, indices: List[int]) -> torch.Tensor:
    """Frames ``indices`` (in frame order) of a frame folder, ``[T, C, H, W]`` float in [0, 1]."""
    names = list_frames(folder)  # listed at each read: keeping every path of a large dataset costs GBs
    return torch.stack([read_image(folder / names[i]) for i in indices])
