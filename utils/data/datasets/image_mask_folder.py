"""Salient-object-detection layout: ``<root>/<split folder>/<image_dir>/*.jpg`` with masks of
the same stems in ``<root>/<split folder>/<mask_dir>/*.png`` (e.g. DUTS-TR/Image, DUTS-TR/Mask).

Images are read as stored (``utils/data/images.py``), masks by their detected encoding
(``utils/data/mask_encoding.py``); hidden and debris files (``._x.png``) are no samples."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Tuple, Union

import numpy as np
import torch
from torch.utils.data import Dataset

from utils.config.arguments import Count, ImageSize, Scales
from utils.data.bad_samples import BadSamples
from utils.data.images import check_channels
from utils.data.masks import MaskBatchCollate, PairPipeline
from utils.data.samplers import WindowOrder
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.pack import PACK_INERT, PackArgs, check_folders, open_packed
from utils.data.sources.pair_folders import StemPaths, _stem, load_pair, pair_files
from utils.data.string_table import StringTable
from utils.errors import ConfigError
from utils.registry import DATASETS


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
