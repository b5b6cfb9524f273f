"""The pack reader: a split ``--mode pack`` wrote (a folder, or ``s3://bucket/prefix``) as a source
(``source.py``): its keys, labels and classes come from the index, and each sample's members decode as its
files would (``utils/data/shards/decode.py``); the sizing, transforms and batching stay the dataset's own.

The arguments of the pack's reading (``cache_limit``, ``cache_dir``, ``shuffle_window``) are each dataset's
own; with a folder of files they do nothing, and say so once (``open.py``).
"""

from __future__ import annotations

import bisect
import functools
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from utils.data.images import as_float
from utils.data.samplers import WindowOrder
from utils.data.shards import decode
from utils.data.shards.grouping import kept_grouping
from utils.data.shards.index import INDEX
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT, ShardReader, checked_cache_folder, open_split
from utils.data.shards.store import is_s3
from utils.data.sources.source import Member, Source
from utils.data.string_table import StringTable
from utils.errors import DataError

PACK_INERT = ("cache_limit", "cache_dir")  # where a pack's shards are cached, and how many: a resume may change them


class PackArgs(NamedTuple):
    """How a pack is read: the cache of remote shards (bytes, folder) and the shard-window order (shards)."""

    cache_limit: Union[int, str] = DEFAULT_CACHE_LIMIT
    cache_dir: Optional[str] = None
    shuffle_window: Optional[int] = None


def is_packed(root: Optional[str], split: str) -> bool:
    """Whether ``root`` is a pack (S3, or a folder whose ``<split>`` holds an index) rather than a folder of files."""
    return root is not None and (is_s3(str(root)) or (Path(root).expanduser() / split / INDEX).is_file())


def check_folders(root: Optional[str], args: Dict[str, Any]) -> None:
    """Before a run folder is made (``utils/commands/start.py``): the folder a remote pack's shards would be cached in
    (a dataset that reads packs names this as its ``check_folders``)."""
    if root is not None and is_s3(str(root)):
        checked_cache_folder(str(root), args.get("cache_dir"))


def open_pack(root: str, split: str, task: str, args: PackArgs, dataset: str) -> "PackedSplit":
    """``root``'s ``split`` as a :class:`PackedSplit` for ``dataset``, which reads ``task`` data; a DataError when
    the pack holds another task's."""
    reader = open_split(root, split, args.cache_limit, args.cache_dir, evict_lru=bool(args.shuffle_window))
    if reader.index.task != task:
        raise DataError(
            f"'{reader.where}' holds packed {reader.index.task} data, which dataset '{dataset}' does not read; "
            f"set data.name=shards (it picks the dataset the data was packed from) or the dataset of {reader.index.task} data"
        )
    return PackedSplit(reader, args.shuffle_window)


class PackedSplit(Source):
    """A packed split's samples (``source.py``): ``image(i)``, ``pair(i)`` and ``frames(i, ...)`` decode a
    sample's members as its files would be read."""

    def __init__(self, reader: ShardReader, shuffle_window: Optional[int]) -> None:
        self.reader, self.index, self.shuffle_window = reader, reader.index, shuffle_window
        self.where = reader.where
        self.keys = self.key_table()
        self.labels = self.index.samples["label"]
        self.classes = self.index.classes
        self.origin = self.index.dataset
        self.in_memory = self.index.extensions == ["npy"]  # an in-memory dataset's tensors, as it gave them
        self.frame_counts = self.index.samples["count"]  # a video's frames: its members

    def __len__(self) -> int:
        return len(self.index)

    def key_table(self) -> StringTable:
        """The packed dataset's keys (its relative paths, or indices for in-memory data), as the index holds them."""
        return _table(self.index.keys, self.index.samples["key"], self.index.keys_sha256)

    def stem_table(self) -> StringTable:
        """The stems of a packed SOD split (its saliency maps' names)."""
        return _table(self.index.stems, self.index.samples["stem"])

    @property
    def num_classes(self) -> int:
        """The classes the labels span: the index's class names, or its largest label + 1 where it names none
        (the network must score them all: a crafted label of 1000 is one line, not a loss out of bounds)."""
        return len(self.classes) if self.classes is not None else self.index.label_count or 0

    def name_of(self, at: int) -> str:
        """Sample ``at`` as errors and predictions name it: ``<split url>:<key>``."""
        return f"{self.where}:{self.index.key(at)}"

    def check_classes(self, given: Optional[Sequence[Any]]) -> None:
        """A DataError when ``given`` (``data.args.classes``, a checkpoint's) differs from the index's classes."""
        classes = self.classes
        if given is not None and classes is not None and [str(c) for c in given] != [str(c) for c in classes]:
            raise DataError(
                f"the shards in '{self.where}' hold the classes {classes}, not {list(given)}; pack the data again or set data.args.classes"
            )

    def stems(self) -> StringTable:
        """Each image-and-mask pair's stem (its saliency map's name)."""
        return self.stem_table()

    def names(self) -> StringTable:
        """Each sample's name (``name_of``), as a table."""
        return StringTable.from_strings(self.name_of(at) for at in range(len(self)))

    def image(self, at: int, channels: int) -> torch.Tensor:
        """Sample ``at``'s image as ``read_pixels`` reads a file (an in-memory dataset's tensor as it was)."""
        return self._decoded(at, [0], channels)[0]

    def image_bytes(self, at: int) -> Tuple[bytes, str]:
        """Sample ``at``'s image member as stored (a JPEG's bytes as they were packed) and its extension."""
        return self.reader.members(at, [0])[0], self.index.ext(self.index.spans(at)[0])

    def pair(self, at: int, channels: int) -> Tuple[torch.Tensor, np.ndarray, str]:
        """Sample ``at``'s image (floats) and mask as ``load_pair`` reads its files, and its stem."""
        image_data, mask_data = self.reader.members(at)
        ext = self.index.ext(self.index.spans(at)[0])
        image = as_float(decode.pixels(image_data, ext, self.name_of(at), channels))
        return image, decode.mask(mask_data, self.name_of(at)), self.index.stem(at)

    def frames(self, video: int, indices: List[int]) -> torch.Tensor:
        """Frames ``indices`` of video ``video`` as ``read_clip`` reads its folder: ``[T, 3, H, W]`` float; each frame
        read once however often the clip repeats it."""
        wanted = sorted(set(indices))
        decoded = dict(zip(wanted, (as_float(frame) for frame in self._decoded(video, wanted, 3))))
        return torch.stack([decoded[i] for i in indices])

    def _decoded(self, at: int, which: List[int], channels: int) -> List[torch.Tensor]:
        spans, where = self.index.spans(at), self.name_of(at)
        named = [f"{where}/frame {i}" if len(spans) > 2 else where for i in which]
        data = self.reader.members(at, which)
        return [decode.pixels(d, self.index.ext(spans[i]), n, channels) for d, i, n in zip(data, which, named)]

    def members(self, at: int) -> List[Member]:
        """Sample ``at``'s members as stored (``--mode pack`` of a pack copies them)."""
        spans = self.index.spans(at)
        return [(self.index.ext(span), data) for span, data in zip(spans, self.reader.members(at))]

    def window_order(self) -> Optional[WindowOrder]:
        """With ``shuffle_window=W``: the training order takes the shards in a seeded order and shuffles the
        samples of each W consecutive ones together (``utils/data/samplers.py``), so a cache of about W shards
        per machine reads each shard whole once per epoch; None (the default): a shuffle of the whole split."""
        if not self.shuffle_window:
            return None
        kept = functools.partial(kept_grouping, self.index)  # computed once per machine, then mapped
        return WindowOrder(self.index.samples["shard"], int(self.shuffle_window), kept)

    def stem_names(self) -> Mapping[str, str]:
        """Each stem's sample name (what the mixed-size error of mask batches names)."""
        return _StemNames(self)


def _table(lines: np.ndarray, starts: np.ndarray, digest: Optional[str] = None) -> StringTable:
    """A text table of the index (lines each ended by a newline, their starts) as a StringTable, read in place:
    the mapped starts themselves, one line per sample and (``digest``) their sha256 as loading proved them
    (``index_load.py``)."""
    return StringTable(lines, starts, end=len(lines), plain=True, digest=digest)


class _StemNames(Mapping[str, str]):
    """Stem -> sample name, by a binary search of the stems (in stem order, as the mask folder lists them)."""

    def __init__(self, packed: PackedSplit) -> None:
        self.packed = packed

    def __getitem__(self, stem: str) -> str:
        index = self.packed.index
        at = bisect.bisect_left(range(len(index)), stem, key=index.stem)
        if at == len(index) or index.stem(at) != stem:
            raise KeyError(stem)
        return self.packed.name_of(at)

    def __iter__(self) -> Iterator[str]:
        return (self.packed.index.stem(at) for at in range(len(self.packed)))

    def __len__(self) -> int:
        return len(self.packed)
