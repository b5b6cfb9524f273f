"""Class-per-folder images as a source (``source.py``): ``<root>/<split>/<class>/<image>`` (ImageNet layout).

One class list for every split: the train split's class folders (sorted), or ``classes`` given. A val/test
class folder that the list lacks is an error naming it; a class missing from val/test keeps its index (a
warning names it); an empty class folder is an error. Hidden and debris names (``utils/data/folders.py``) are
never classes or images. Symlinked folders are followed, but each real directory is read once per class, so a
link back up the tree does not loop. Images are read as stored (``utils/data/images.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, List, Optional, Sequence, Set, Tuple

import numpy as np

from utils.data.folders import subfolders, walk_visible, warn_missing_classes
from utils.data.identity import relative_key
from utils.data.sources.files import ImageFileSource
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


class ClassFolders(ImageFileSource):
    """The images under ``<root>/<split>/<class>/``: keys are their paths relative to the split folder."""

    def __init__(self, root: Path, split: str, classes: Optional[Sequence[str]]) -> None:
        self.folder = folder = self._split_folder(root, split)
        self.where = str(folder)
        self.classes = self._class_list(root, folder, classes)
        self.keys, self.labels = scan(folder, self.classes)
        if not len(self.keys):
            raise DataError(
                f"data folder '{folder}' holds no images (looked for {', '.join(IMG_EXTENSIONS)} under {folder}/<class>/)"
            )
        warn_missing_classes(folder, self.classes, {self.classes[label] for label in np.unique(self.labels)})
        self._prefix = os.path.join(str(folder), "")  # + a key: the path the scan found

    @staticmethod
    def _split_folder(root: Path, split: str) -> Path:
        folder = root / split
        if not folder.is_dir():
            hint = (
                "; data.test_split names the split folder that testing reads (e.g. data.test_split=val)"
                if split not in ("train", "val")
                else ""
            )
            raise DataError(f"data folder '{folder}' does not exist; expected <root>/{split}/<class>/<image>{hint}")
        return folder

    @staticmethod
    def _class_list(root: Path, folder: Path, classes: Optional[Sequence[str]]) -> List[str]:
        """``classes`` when given, else the train split's class folders (the split's own when train is absent)."""
        own = subfolders(folder)
        if classes is None:
            train = root / "train"
            classes = subfolders(train) if train.is_dir() else own
            if not classes:
                raise DataError(
                    f"data folder '{train if train.is_dir() else folder}' holds no images: it has no class folders; expected <root>/<split>/<class>/<image>"
                )
        unknown = [name for name in own if name not in classes]
        if unknown:
            raise DataError(
                f"class folder(s) {unknown} in '{folder}' are not classes of the training split ({', '.join(classes)}); "
                "remove them, add them to the train split, or list every class in data.args.classes"
            )
        return list(classes)

    def name_of(self, at: int) -> str:
        """The file of sample ``at``."""
        return self._prefix + self.keys[at]
