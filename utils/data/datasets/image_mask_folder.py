"""Salient-object-detection layout: ``<root>/<split folder>/<image_dir>/*.jpg`` with masks of
the same stems in ``<root>/<split folder>/<mask_dir>/*.png`` (e.g. DUTS-TR/Image, DUTS-TR/Mask).

Images are read as stored (``utils/data/images.py``), masks by their detected encoding
(``utils/data/mask_encoding.py``); hidden and debris files (``._x.png``) are no samples."""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch.utils.data import Dataset

from utils.config.arguments import Count, ImageSize, Scales
from utils.data.bad_samples import BadSamples
from utils.data.folders import visible
from utils.data.images import check_channels, read_image
from utils.data.mask_encoding import read_mask
from utils.data.masks import MaskBatchCollate, PairPipeline
from utils.data.samplers import WindowOrder
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.pack import PACK_INERT, PackArgs, check_folders, open_packed
from utils.data.string_table import StringTable
from utils.errors import ConfigError, DataError, name_list
from utils.registry import DATASETS

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


@DATASETS.register("image_mask_folder")
class ImageMaskFolder(Dataset):
    """Image/mask pairs matched by file stem; items as described in ``utils/data/masks.py``.

    ``splits`` maps the framework's split names to folders under ``root``
    (default ``{train: train, val: val, test: test}``; for DUTS e.g.
    ``{train: DUTS-TR, val: DUTS-TE, test: DUTS-TE}``). ``multi_scale`` resizes
    each training batch by a random factor from the list; ``size: null`` keeps the
    stored sizes (then a batch of mixed sizes is an error naming two files). ``channels``
    and ``on_bad_sample`` (stop, skip) work as in ``image_folder``. ``image_dir`` and
    ``mask_dir`` may name the split folder as ``{folder}``: DUTS as downloaded
    (``DUTS-TR/DUTS-TR-Image``) is ``image_dir: "{folder}-Image"``.
    """

    SIZING = ("size", "last")  # --mode predict: resized to data.args.size after the eval transforms (PairPipeline)
    INERT_ARGS = PACK_INERT  # data.args a resume may change (utils/checkpoint/guard.py)
    task = "sod"  # the eval.metric its samples are for (utils/data/input_shape.py: check_task)
    check_folders = staticmethod(check_folders)  # a remote pack's cache folder, checked before a run folder is made

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        size: Optional[ImageSize] = 320,
        splits: Optional[Dict[str, str]] = None,
        image_dir: str = "Image",
        mask_dir: str = "Mask",
        multi_scale: Optional[Scales] = None,
        size_divisor: Count = 32,
        channels: int = 3,
        on_bad_sample: Literal["stop", "skip"] = "stop",
        cache_limit: Union[int, str] = DEFAULT_CACHE_LIMIT,
        cache_dir: Optional[str] = None,
        shuffle_window: Optional[Count] = None,
    ) -> None:
        self.bad_samples = BadSamples(on_bad_sample, "image_mask_folder")
        self.channels = check_channels(channels, "image_mask_folder")
        if root is None:
            raise ConfigError(
                f"dataset image_mask_folder needs data.root=<folder holding <split>/{image_dir} and <split>/{mask_dir}>"
            )
        pack = PackArgs(cache_limit, cache_dir, shuffle_window)
        self.packed = open_packed(root, split, "sod", pack, "image_mask_folder")  # a pack's splits: train, val, test
        if self.packed is not None:
            self.packed.ignores(ImageMaskFolder.__init__, splits=splits, image_dir=image_dir, mask_dir=mask_dir)
            self.folder, self.images = self.packed.where, self.packed.key_table()
            paths: Mapping[str, str] = self.packed.stem_names()  # what the mixed-size error names
        else:
            folders = {"train": "train", "val": "val", "test": "test", **(splits or {})}
            if split not in folders:
                raise ConfigError(f"split '{split}' has no folder; add it to data.args.splits (now {folders})")
            folder = folders[split]
            base = Path(root) / folder
            self.folder = base / image_dir.format(folder=folder)
            self.mask_folder = base / mask_dir.format(folder=folder)
            self.images, self.masks = pair_files(self.folder, self.mask_folder)  # file names, in stem order
            paths = StemPaths(self.folder, self.images)
        self.pipeline = PairPipeline(size, transform, keep_original=split != "train")
        self.collate_fn = MaskBatchCollate(multi_scale if split == "train" else None, size_divisor, paths)

    def __len__(self) -> int:
        return len(self.images)

    def key_table(self) -> StringTable:
        """Each image's path relative to the split's image folder (its name): the data's identity, whatever the root."""
        return self.images

    def sample_keys(self) -> List[str]:
        """The keys as a list."""
        return self.images.tolist()

    def pair(self, index: int) -> Tuple[str, Path, Path]:
        """``(stem, image, mask)`` of sample ``index``."""
        image = self.images[index]
        return _stem(image), self.folder / image, self.mask_folder / self.masks[index]

    def _read(self, at: int) -> Tuple[torch.Tensor, np.ndarray, str]:
        if self.packed is not None:
            return self.packed.pair(at, self.channels)
        stem, image_path, mask_path = self.pair(at)
        return (*load_pair(image_path, mask_path, self.channels), stem)

    def window_order(self) -> Optional[WindowOrder]:
        """A pack's shard-window order (``data.args.shuffle_window``); None for files (a shuffle of the split)."""
        return self.packed.window_order() if self.packed is not None else None

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, Dict[str, Any]]:
        image, mask, stem = self.bad_samples.first_usable(index, len(self), self._read, str(self.folder))
        return self.pipeline(image, mask, stem)
