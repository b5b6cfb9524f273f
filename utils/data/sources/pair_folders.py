"""Image and mask pairs as a source (``source.py``): ``<root>/<split folder>/<image_dir>/*.jpg`` with masks of
the same stems in ``<root>/<split folder>/<mask_dir>/*.png`` (e.g. DUTS-TR/Image, DUTS-TR/Mask).

Images are read as stored (``utils/data/images.py``), masks by their detected encoding
(``utils/data/mask_encoding.py``); hidden and debris files (``._x.png``) are no samples."""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import torch

from utils.data.folders import visible
from utils.data.images import read_image
from utils.data.mask_encoding import read_mask
from utils.data.sources.source import Member, Source, ext_of
from utils.data.string_table import StringTable
from utils.errors import ConfigError, DataError, name_list

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
MASK_EXTS = (".png", ".bmp", ".jpg", ".jpeg", ".tif", ".tiff")


def _by_stem(folder: Path, exts: Sequence[str]) -> Dict[str, str]:
    """The name of each image file in ``folder`` by its stem."""
    files: Dict[str, str] = {}
    for path in sorted(folder.iterdir()):
        if not path.is_file() or path.suffix.lower() not in exts or not visible(path.name):
            continue
        if path.stem in files:
            raise DataError(
                f"'{folder}' holds two files with stem '{path.stem}' ({files[path.stem]}, {path.name}); keep one"
            )
        files[path.stem] = path.name
    return files


def pair_files(image_folder: Path, mask_folder: Path) -> Tuple[StringTable, StringTable]:
    """The image and the mask file names of every stem, in stem order; an error lists unmatched files on either side."""
    for folder in (image_folder, mask_folder):
        if not folder.is_dir():
            raise DataError(
                f"folder '{folder}' does not exist; expected <data.root>/<split folder>/{{image_dir, mask_dir}} (see data.args.splits)"
            )
    images, masks = _by_stem(image_folder, IMAGE_EXTS), _by_stem(mask_folder, MASK_EXTS)
    no_mask = sorted(set(images) - set(masks))
    no_image = sorted(set(masks) - set(images))
    if no_mask or no_image:
        parts = []
        if no_mask:
            parts.append(
                f"{len(no_mask)} image(s) in '{image_folder}' have no mask in '{mask_folder}': {name_list(no_mask)}"
            )
        if no_image:
            parts.append(
                f"{len(no_image)} mask(s) in '{mask_folder}' have no image in '{image_folder}': {name_list(no_image)}"
            )
        raise DataError("; ".join(parts) + "; every image needs a mask with the same file stem")
    if not images:
        raise DataError(f"folder '{image_folder}' holds no images (extensions {', '.join(IMAGE_EXTS)})")
    stems = sorted(images)
    return StringTable.from_strings(images[s] for s in stems), StringTable.from_strings(masks[s] for s in stems)


class StemPaths(Mapping[str, str]):
    """Each stem's image path, looked up in the stem-sorted table of image names (what the mixed-size error
    names): no dict of every sample in each loader worker."""

    def __init__(self, folder: Path, names: StringTable) -> None:
        self.folder, self.names = folder, names

    def __getitem__(self, stem: str) -> str:
        at = bisect.bisect_left(self.names, stem, key=_stem)
        if at == len(self.names) or _stem(self.names[at]) != stem:
            raise KeyError(stem)
        return str(self.folder / self.names[at])

    def __iter__(self) -> Iterator[str]:
        return (_stem(name) for name in self.names)

    def __len__(self) -> int:
        return len(self.names)


def _stem(name: str) -> str:
    return Path(name).stem


def load_pair(image_path: Path, mask_path: Path, channels: int = 3) -> Tuple[torch.Tensor, np.ndarray]:
    """``[channels, H, W]`` float image and ``(H, W)`` float32 mask, both in [0, 1] (or a BadFile)."""
    return read_image(image_path, channels), read_mask(mask_path)


class PairFolders(Source):
    """The pairs of ``split``'s folder (``splits`` maps split names to folders under ``root``): keys are the
    image names (paths relative to the image folder), in stem order."""

    def __init__(self, root: str, split: str, splits: Optional[Dict[str, str]], image_dir: str, mask_dir: str) -> None:
        folders = {"train": "train", "val": "val", "test": "test", **(splits or {})}
        if split not in folders:
            raise ConfigError(f"split '{split}' has no folder; add it to data.args.splits (now {folders})")
        folder = folders[split]
        base = Path(root) / folder
        self.folder = base / image_dir.format(folder=folder)
        self.mask_folder = base / mask_dir.format(folder=folder)
        self.where = str(self.folder)
        self.keys, self.masks = pair_files(self.folder, self.mask_folder)  # file names, in stem order
        self.labels = np.full(len(self.keys), -1, np.int64)

    def files(self, at: int) -> Tuple[str, Path, Path]:
        """``(stem, image, mask)`` of sample ``at``."""
        image = self.keys[at]
        return _stem(image), self.folder / image, self.mask_folder / self.masks[at]

    def name_of(self, at: int) -> str:
        return str(self.folder / self.keys[at])

    def file(self, at: int) -> Optional[str]:
        return self.name_of(at)

    def pair(self, at: int, channels: int) -> Tuple[torch.Tensor, np.ndarray, str]:
        """Sample ``at``'s image (floats) and mask (``load_pair``), and its stem."""
        stem, image_path, mask_path = self.files(at)
        return (*load_pair(image_path, mask_path, channels), stem)

    def stems(self) -> StringTable:
        """Each pair's stem (its saliency map's name)."""
        return StringTable.from_strings(_stem(name) for name in self.keys)

    def stem_names(self) -> Mapping[str, str]:
        """Each stem's image path (what the mixed-size error of mask batches names)."""
        return StemPaths(self.folder, self.keys)

    def members(self, at: int) -> List[Member]:
        _, image, mask = self.files(at)
        return [(ext_of(image), image), (ext_of(mask), mask)]
