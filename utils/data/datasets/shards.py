"""Packed shards (``--mode pack``) in a folder or in S3: ``data.name=shards``, ``data.root=DIR`` or ``s3://bucket/prefix``.

A map-style dataset: sample ``i`` is read by byte range from its shard through the
split's index, so the framework's samplers (the world-size-independent global order,
exact resume, unpadded evaluation) work as for a folder. Items are those of the dataset
that was packed: ``image_folder`` and in-memory datasets (classification), or
``image_mask_folder`` (SOD), with the same arguments (``channels``, ``image_size``;
``size``, ``multi_scale``, ``size_divisor``), or ``video_frames_folder`` (clips: ``clip_len``,
``frame_stride``, ``num_clips``, ``pad_short``). Remote shards are cached whole under
``cache_dir`` up to ``cache_limit`` bytes (least recently used evicted first; only the cache's own
files count and are ever deleted, so other files in ``cache_dir`` are left alone; a ``cache_dir`` it
cannot write is one error line before a run folder is made); ``shuffle_window`` makes the training
order shard-aware (``window_order``).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Set, Tuple, Union

import torch
from torch.utils.data import Dataset, default_collate

from utils.arguments import Count, ImageSize, Scales
from utils.data.bad_samples import BadSamples
from utils.data.batch import check_one_size
from utils.data.images import as_float, check_channels
from utils.data.masks import MaskBatchCollate, PairPipeline
from utils.data.samplers import WindowOrder
from utils.data.shards import decode
from utils.data.shards.clips import ShardClips
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT, checked_cache_folder, open_split
from utils.data.shards.store import is_s3
from utils.data.transforms import pixels_then_floats
from utils.errors import ConfigError, DataError
from utils.registry import DATASETS

log = logging.getLogger(__name__)
RESIZE_FIX = "data.args.image_size=N, or a Resize / RandomResizedCrop in data.train_transforms and a Resize + CenterCrop in data.eval_transforms"


# the data.args of each task's items; another task's, set to other than its default, would silently do nothing
TASK_ARGS = {
    "classification": ("channels", "image_size"),
    "sod": ("channels", "size", "multi_scale", "size_divisor"),
    "video": ("clip_len", "frame_stride", "num_clips", "pad_short"),
}
_WARNED: Set[Tuple[str, str]] = set()


def warn_unused(task: str, given: Dict[str, Any], where: str) -> None:
    """A warning, once per data and key, for each task argument that ``task``'s shards do not use."""
    defaults = inspect.signature(Shards.__init__).parameters
    for name, value in given.items():
        if name not in TASK_ARGS[task] and value != defaults[name].default and (where, name) not in _WARNED:
            _WARNED.add((where, name))
            log.warning("data.args.%s=%r does nothing: the shards in '%s' hold %s data", name, value, where, task)


@DATASETS.register("shards")
class Shards(Dataset):
    """The ``split`` of the data packed under ``root`` (see the module doc)."""

    INERT_ARGS = ("cache_limit", "cache_dir")  # where shards are cached, and how many: a resume may change them

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        cache_limit: Union[int, str] = DEFAULT_CACHE_LIMIT,
        cache_dir: Optional[str] = None,
        on_bad_sample: Literal["stop", "skip"] = "stop",
        classes: Optional[Sequence[Any]] = None,
        channels: int = 3,
        image_size: Optional[Count] = None,
        size: Optional[ImageSize] = 320,
        multi_scale: Optional[Scales] = None,
        size_divisor: Count = 32,
        clip_len: Count = 16,
        frame_stride: Count = 1,
        num_clips: Count = 3,
        pad_short: bool = False,
        shuffle_window: Optional[Count] = None,
    ) -> None:
        if root is None:
            raise ConfigError("dataset shards needs data.root=<folder or s3://bucket/prefix written by --mode pack>")
        self.bad_samples = BadSamples(on_bad_sample, "shards")
        self.channels = check_channels(channels, "shards")
        # its one-line errors: before training
        self.reader = open_split(root, split, cache_limit, cache_dir, evict_lru=bool(shuffle_window))
        self.index = index = self.reader.index
        self.task = index.task  # the eval.metric its samples are for (utils/data/input_shape.py: check_task)
        given = dict(channels=channels, image_size=image_size, size=size, multi_scale=multi_scale)
        given.update(size_divisor=size_divisor, clip_len=clip_len, frame_stride=frame_stride, num_clips=num_clips)
        given.update(pad_short=pad_short)
        warn_unused(index.task, given, self.reader.store.url)
        self.where = self.reader.where
        self.classes = index.classes
        if (
            classes is not None
            and index.classes is not None
            and [str(c) for c in classes] != [str(c) for c in index.classes]
        ):
            raise DataError(
                f"the shards in '{self.where}' hold the classes {index.classes}, not {list(classes)}; pack the data again or set data.args.classes"
            )
        self.num_classes = len(index.classes) if index.classes is not None else 0
        self.transform = transform
        self.clips: Optional[ShardClips] = None
        if index.task == "video":  # clips as video_frames_folder cuts them; its default collate
            clip = {"clip_len": clip_len, "frame_stride": frame_stride, "num_clips": num_clips, "pad_short": pad_short}
            self.clips = ShardClips(self.reader, transform, clip)
        elif index.task == "sod":
            self.pipeline = PairPipeline(size, transform, keep_original=split != "train")
            paths = {
                index.stem(at): f"{self.where}:{index.key(at)}" for at in range(len(index))
            }  # the mixed-size error
            self.collate_fn = MaskBatchCollate(multi_scale if split == "train" else None, size_divisor, paths)
        else:
            from torchvision.transforms import v2  # here, not at import: torchvision costs about 1 s

            self.resize = v2.Resize((image_size, image_size), antialias=True) if image_size else None
            self.collate_fn = self._collate
        self._first_of_shape: Dict[Tuple[int, ...], str] = {}
        self.shuffle_window = shuffle_window

    @staticmethod
    def check_folders(root: Optional[str], args: Dict[str, Any]) -> None:
        """Before a run folder is made (``utils/start.py``): the folder remote shards would be cached in."""
        if root is not None and is_s3(root):
            checked_cache_folder(root, args.get("cache_dir"))

    def window_order(self) -> Optional[WindowOrder]:
        """With ``shuffle_window=W``: the training order takes the shards in a seeded order and shuffles the
        samples of each W consecutive ones together (``utils/data/samplers.py``), so a cache of about W shards
        per machine reads each shard whole once per epoch; None (the default): a shuffle of the whole split."""
        if not self.shuffle_window:
            return None
        # a training item is a sample (a whole video for clips)
        return WindowOrder(self.index.samples["shard"], int(self.shuffle_window))

    def __len__(self) -> int:
        return len(self.clips) if self.clips is not None else len(self.index)

    def sample_keys(self) -> List[str]:
        """The keys of the packed dataset (its relative paths, or indices for in-memory data)."""
        if self.clips is not None:
            return self.clips.sample_keys()
        return [self.index.key(at) for at in range(len(self.index))]

    def _read(self, at: int) -> Tuple[torch.Tensor, Any, str]:
        members = self.reader.members(at)
        where = f"{self.where}:{self.index.key(at)}"
        image = decode.pixels(members[0], self.index.ext(self.index.spans(at)[0]), where, self.channels)
        if self.index.task == "sod":
            return as_float(image), decode.mask(members[1], where), self.index.stem(at)
        return image, self.index.label(at), where

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, Any]:
        if self.clips is not None:
            return self.clips[index]
        image, target, where = self.bad_samples.first_usable(index, len(self), self._read, self.where)
        if self.index.task == "sod":
            return self.pipeline(image, target, where)
        if self.index.extensions == ["npy"]:  # an in-memory dataset's tensors, as it gave them
            return (image if self.transform is None else self.transform(image)), target
        picture = pixels_then_floats(image, self.resize, self.transform)  # as image_folder reads its files
        self._first_of_shape.setdefault(tuple(picture.shape), where)
        return picture, target

    def _collate(self, batch: List[Tuple[torch.Tensor, int]]) -> Any:
        """``default_collate``, or a DataError naming two samples whose images differ in size."""
        check_one_size([(self._first_of_shape.get(tuple(x.shape), "?"), x.shape) for x, _ in batch], RESIZE_FIX)
        return default_collate(batch)

    _collate.collates_new_tensors = True  # type: ignore[attr-defined]  # a new batch: the loader may normalize it in place
