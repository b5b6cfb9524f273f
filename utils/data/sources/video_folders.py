"""Videos extracted to frames as a source (``source.py``): ``<class>/<video>/<frame>.jpg``, a sample per video.

Two ways to say which videos form a split:

- split folders: ``<root>/<split>/<class>/<video>/<frame>.jpg``;
- split files (``split_files: {train: trainlist01.txt, test: testlist01.txt}``,
  paths relative to ``root``): one video per line, ``<class>/<video>[.avi] [anything]``,
  frames under ``<root>/<class>/<video>/``. UCF101's official lists work as they are.

Frames are listed by ``utils/data/frames.py``; hidden and debris names are no classes, videos or frames.
A class folder without videos is an error; a split without some class is a warning.
Class indices follow ``classes`` when given, else the sorted class names found
in all split folders or all listed split files (so every split agrees).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

from utils.data.folders import subfolders, warn_missing_classes
from utils.data.identity import relative_key
from utils.data.sources.files import FrameFolderSource, frame_counts
from utils.data.string_table import StringTable
from utils.errors import ConfigError, DataError


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


class VideoFolders(FrameFolderSource):
    """The frame folders of ``split`` under ``base``: keys are their paths relative to ``base``, names their paths."""

    def __init__(
        self, base: Path, split: str, split_files: Optional[Dict[str, str]], classes: Optional[List[str]]
    ) -> None:
        if split_files:
            if split not in split_files:
                raise ConfigError(
                    f"data.args.split_files has no entry for split '{split}'; add one (it may name the test list)"
                )
            lists = {s: read_split_file(base, base / f) for s, f in split_files.items()}
            videos = lists[split]
            known = sorted({c for entries in lists.values() for c, _ in entries})
        else:
            videos = scan_split_folder(base / split)
            splits = {split, *(s for s in ("train", "val", "test") if (base / s).is_dir())}
            known = sorted({c for s in splits for c in subfolders(base / s)})
        self.classes = list(classes) if classes else known
        index = {name: i for i, name in enumerate(self.classes)}
        unknown = sorted({c for c, _ in videos if c not in index})
        if unknown:
            raise DataError(
                f"classes {unknown[:5]} of split '{split}' are not in data.args.classes; add them or drop those videos"
            )
        self.where = str(base / split if not split_files else base / split_files[split])
        warn_missing_classes(Path(self.where), self.classes, {c for c, _ in videos})
        for _, folder in videos:
            if not folder.is_dir():
                raise DataError(
                    f"video folder '{folder}' does not exist; extract its frames there or drop it from the split"
                )
        self.labels = np.asarray([index[c] for c, _ in videos], np.int64)
        self.frame_counts = frame_counts([folder for _, folder in videos])
        self._names = StringTable.from_strings(str(folder) for _, folder in videos)
        self.keys = StringTable.from_strings(relative_key(str(folder), str(base)) for _, folder in videos)

    def names(self) -> StringTable:
        """Each video's frame folder."""
        return self._names

    def name_of(self, at: int) -> str:
        return self._names[at]
