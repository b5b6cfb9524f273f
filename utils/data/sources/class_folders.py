"""Class-per-folder images, ``<root>/<split>/<class>/<image>`` (ImageNet layout): the keys and labels of a split.

Symlinked folders are followed, but each real directory is read once per class, so a link back up the tree
does not loop; hidden and debris names (``utils/data/folders.py``) are never classes or images.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, List, Sequence, Set, Tuple

import numpy as np

from utils.data.folders import walk_visible
from utils.data.identity import relative_key
from utils.data.string_table import StringTable
from utils.errors import DataError

# torchvision's list (torchvision.datasets.folder.IMG_EXTENSIONS), kept here: importing torchvision costs about 1 s
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def scan(folder: Path, classes: Sequence[str]) -> Tuple[StringTable, np.ndarray]:
    """The key (path relative to ``folder``) and class index of every image under ``folder/<class>/``, in a fixed
    order: a table of the keys and an array of the labels.

    Symlinked directories are followed, but a real directory is read once per
    class: a link back into the tree (``a/again -> ../a``) adds nothing. A class
    folder without images is an error naming it.
    """
    counts = [0] * len(classes)

    def keys() -> Iterator[str]:
        for index, name in enumerate(classes):
            top = folder / name
            if not top.is_dir():
                continue
            seen: Set[str] = set()
            found: List[Tuple[str, List[str]]] = []
            for dirpath, dirnames, filenames in walk_visible(top):
                real = os.path.realpath(dirpath)
                if real in seen:
                    dirnames[:] = []  # a loop or a second link to a directory already read
                    continue
                seen.add(real)
                found.append((dirpath, [f for f in filenames if f.lower().endswith(IMG_EXTENSIONS)]))
            for dirpath, files in sorted(found):
                counts[index] += len(files)
                yield from _keys_in(dirpath, sorted(files), folder)
            if not counts[index]:
                raise DataError(
                    f"class folder '{top}' holds no images (looked for {', '.join(IMG_EXTENSIONS)}); add its images or remove the folder"
                )

    table = StringTable.from_strings(keys())
    return table, np.repeat(np.arange(len(classes), dtype=np.int32), counts)


def _keys_in(dirpath: str, files: List[str], folder: Path) -> List[str]:
    """``os.path.relpath(<dirpath>/<file>, folder)`` of each of ``files``: one relpath per directory."""
    where = relative_key(dirpath, str(folder))
    if where == "." or where == ".." or where.startswith("../"):  # a class named ".", "..": relpath says
        return [os.path.relpath(os.path.join(dirpath, f), folder) for f in files]
    return [f"{where}/{f}" for f in files]
