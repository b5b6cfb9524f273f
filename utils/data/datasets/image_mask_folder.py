"""Salient-object-detection pairs: images and masks of the same stems (e.g. DUTS-TR/Image, DUTS-TR/Mask), or a
pack of them, read through a source (``utils/data/sources/pair_folders.py`` for the folder layout)."""

from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, Literal, Optional, Tuple, Union

import numpy as np
import torch

from utils.config.arguments import Count, ImageSize, Scales
from utils.data.bad_samples import BadSamples
from utils.data.images import check_channels
from utils.data.masks import MaskBatchCollate, PairPipeline
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.dataset import SourceDataset
from utils.data.sources.open import changed, open_source
from utils.data.sources.pack import PackArgs
from utils.data.sources.pair_folders import PairFolders
from utils.errors import ConfigError
from utils.registry import DATASETS


@DATASETS.register("image_mask_folder")
class ImageMaskFolder(SourceDataset):
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
    task = "sod"  # the eval.metric its samples are for (utils/data/input_shape.py: check_task)

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
        files = partial(PairFolders, root, split, splits, image_dir, mask_dir)
        placed = changed(ImageMaskFolder.__init__, splits=splits, image_dir=image_dir, mask_dir=mask_dir)
        self.source = open_source(root, split, self.task, pack, files, "image_mask_folder", None, placed)
        self.folder = self.source.where
        self.pipeline = PairPipeline(size, transform, keep_original=split != "train")
        self.collate_fn = MaskBatchCollate(
            multi_scale if split == "train" else None, size_divisor, self.source.stem_names()
        )

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, Dict[str, Any]]:
        image, mask, stem = self.bad_samples.first_usable(index, len(self), self._read, self.folder)
        return self.pipeline(image, mask, stem)

    def _read(self, at: int) -> Tuple[torch.Tensor, np.ndarray, str]:
        return self.source.pair(at, self.channels)  # type: ignore[attr-defined]
