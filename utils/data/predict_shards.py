"""``--mode predict --input`` a packed split: ``DIR/<split>`` (the folder holding its ``index.json``) or
``s3://bucket/prefix/<split>``, as ``--mode pack`` wrote it.

Its images (classification, SOD) or videos are read by byte range through the split's
index, as ``data.name=shards`` reads them, then sized and transformed as files are
(``predict_inputs.py``, ``predict_videos.py``); the labels or masks packed with them are not
read. Rows name a sample ``<split url>:<key>`` and a saliency network's masks mirror the keys.
Remote shards are cached as training caches them (``data.args.cache_limit``, ``cache_dir``).
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple, Union

import torch

from utils.data.shards.index import INDEX
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT, open_split
from utils.data.shards.store import is_s3, words
from utils.data.shards.stores import open_store
from utils.data.sources.pack import PackedSplit
from utils.errors import DataError


def packed_split(spec: Optional[str]) -> Optional[Tuple[str, str]]:
    """``(root, split)`` where ``spec`` names a packed split, else None (files, folders, globs); a DataError for a
    file of a packed split, a folder (or prefix) of packed splits, or a bucket alone, naming what to give. An S3
    ``spec`` names a packed split or is refused: S3 holds no other input."""
    if not spec:
        return None
    if is_s3(spec):
        url = spec.rstrip("/")
        root, _, split = url.rpartition("/")
        if len(root) <= len("s3://"):
            raise DataError(f"--input '{spec}' names a bucket; name a packed split: s3://bucket/prefix/<split>")
    else:
        path = Path(spec).expanduser()
        url, root, split = str(path), str(path.parent), path.name
    store = open_store(url)
    if store.has(INDEX):
        return root, split
    folder, a_file = words(store)
    if store.has("") and open_store(root).has(INDEX):  # the index or a shard of a packed split
        raise DataError(f"--input '{spec}' is {a_file} of a packed split; name the split's {folder}: --input {root}")
    splits = store.splits()
    if splits:
        example = "test" if "test" in splits else splits[0]
        raise DataError(f"--input '{spec}' holds the packed splits {splits}; name one: --input {url}/{example}")
    if is_s3(spec):
        raise DataError(
            f"--input '{spec}' holds no packed split (no {INDEX} under it); name a split --mode pack wrote: "
            "s3://bucket/prefix/<split>"
        )
    return None


class ShardImages:
    """A packed split's images, as :class:`~utils.data.predict_inputs.ImageFiles` gives files."""

    def __init__(self, packed: PackedSplit) -> None:
        self.packed = packed
        keys = packed.key_table().tolist()
        self.paths = [f"{packed.where}:{key}" for key in keys]
        self.relative = [Path(key) for key in keys]

    def pixels(self, index: int, channels: int) -> torch.Tensor:
        return self.packed.image(index, channels)  # its mask, if packed, is not read

    def encoded(self, index: int) -> Optional[bytes]:
        """The image member's bytes as packed; None for an in-memory dataset's tensor."""
        data, ext = self.packed.image_bytes(index)
        return None if ext == "npy" else data


class ShardVideos:
    """A packed split's videos, as :class:`~utils.data.predict_videos.FrameFolders` gives folders."""

    def __init__(self, packed: PackedSplit) -> None:
        self.packed = packed
        self.paths = [packed.name_of(at) for at in range(len(packed))]

    def frame_counts(self) -> List[int]:
        return self.packed.index.samples["count"].tolist()

    def read(self, video: int, indices: List[int]) -> torch.Tensor:
        return self.packed.frames(video, indices)


def shard_source(
    packed: Tuple[str, str], task: str, cache_limit: Optional[Union[int, str]], cache_dir: Optional[str]
) -> Union[ShardImages, ShardVideos]:
    """The packed split ``(root, split)`` as predict's inputs; a DataError when it holds another task's data."""
    reader = open_split(*packed, cache_limit or DEFAULT_CACHE_LIMIT, cache_dir)
    if reader.index.task != task:
        raise DataError(
            f"--input '{reader.where}' holds packed {reader.index.task} data, but the checkpoint's network is for "
            f"eval.metric={task}; give a split packed from {task} data"
        )
    split = PackedSplit(reader, None)
    return ShardVideos(split) if task == "video" else ShardImages(split)
