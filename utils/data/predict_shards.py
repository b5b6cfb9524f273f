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
from typing import Optional, Tuple, Union

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


def shard_source(
    packed: Tuple[str, str], task: str, cache_limit: Optional[Union[int, str]], cache_dir: Optional[str]
) -> PackedSplit:
    """The packed split ``(root, split)`` as predict's inputs: the pack reader training reads it through
    (``utils/data/sources/pack.py``); a DataError when it holds another task's data."""
    reader = open_split(*packed, cache_limit or DEFAULT_CACHE_LIMIT, cache_dir)
    if reader.index.task != task:
        raise DataError(
            f"--input '{reader.where}' holds packed {reader.index.task} data, but the checkpoint's network is for "
            f"eval.metric={task}; give a split packed from {task} data"
        )
    return PackedSplit(reader, None)
