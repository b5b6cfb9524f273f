"""Videos extracted to frames, ``<class>/<video>/<frame>.jpg``: the videos of a split, from a split folder
(``<root>/<split>/<class>/<video>/``) or a split file (one ``<class>/<video>`` a line, UCF101's lists)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Tuple

from utils.data.folders import subfolders
from utils.errors import DataError


def read_split_file(root: Path, path: Path) -> List[Tuple[str, Path]]:
    """``(class, video folder)`` for every line of a split list."""
    if not path.is_file():
        raise DataError(f"split file '{path}' does not exist; data.args.split_files paths are relative to data.root")
    videos = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        rel = Path(line.split()[0])
        if len(rel.parts) < 2:
            raise DataError(f"{path}:{number}: '{rel}' is not <class>/<video>; every line must name the class folder")
        folder = root / rel if (root / rel).is_dir() else root / rel.with_suffix("")
        videos.append((rel.parts[-2], folder))
    return videos


def scan_split_folder(folder: Path) -> List[Tuple[str, Path]]:
    if not folder.is_dir():
        raise DataError(
            f"data folder '{folder}' does not exist; expected <root>/<split>/<class>/<video>/<frame>.jpg, "
            "or give data.args.split_files={split: list file}"
        )
    videos = []
    for name in subfolders(folder):
        found = subfolders(folder / name)
        if not found:
            raise DataError(
                f"class folder '{folder / name}' holds no video folders; expected <class>/<video>/<frame>.jpg, add its videos or remove the folder"
            )
        videos += [(name, folder / name / video) for video in found]
    return videos
