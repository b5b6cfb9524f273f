"""Reading one sample's members from its shard by byte range, through the index."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import List, Optional, Set, Union

import numpy as np

from utils.data.bad_samples import BadFile
from utils.data.shards.cache import ShardCache, ShardMismatch
from utils.data.shards.fill import start_fill
from utils.data.shards.index import INDEX, Index, Shard, parse_header
from utils.data.shards.index_load import load
from utils.data.shards.sizes import parse_size
from utils.data.shards.store import LocalStore, Store, is_s3
from utils.data.shards.stores import open_store
from utils.errors import ConfigError, DataError
from utils.files.writable import why_not_writable
from utils.run.folder import run_holding

DEFAULT_CACHE_LIMIT = "10GB"


def load_index(store: Store, split: str, cache: Optional[ShardCache]) -> Index:
    """The split's index from ``store``, its arrays mapped in place (a folder) or from verified copies in ``cache``
    (S3); a one-line error when it is missing, damaged, of another version, or of another split."""
    where = f"{store.url}/{split}/{INDEX}"

    def path_of(file: Shard) -> Path:
        if cache is None:
            assert isinstance(store, LocalStore)
            return store.path(f"{split}/{file.name}")
        try:
            return cache.index_file(file, split)
        except ShardMismatch:
            raise DataError(
                f"index array '{store.url}/{split}/{file.name}' does not match its sha256 in {INDEX}; pack the data again"
            ) from None

    index = load(store.read(f"{split}/{INDEX}"), where, path_of, hashed=cache is not None)  # S3: checked on arrival
    if index.split != split:
        raise DataError(f"shard index '{where}' is of split '{index.split}', not '{split}'; pack the data again")
    return index


def packed_task(root: str, split: str) -> str:
    """The task ``root``'s ``split`` was packed for, from its ``index.json`` alone (the arrays are not read)."""
    store = open_store(root)
    return parse_header(store.read(f"{split}/{INDEX}"), f"{store.url}/{split}/{INDEX}").task


def cache_folder(root: str, cache_dir: Optional[str]) -> Path:
    """``cache_dir``, else ``$XDG_CACHE_HOME`` (``~/.cache``) ``/regtrain-shards/<bucket>/<prefix>``, inside that folder
    whatever the prefix holds (``..`` in an S3 key is a name, not a way up)."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    parts = [part for part in root[len("s3://") :].split("/") if part not in ("", ".", "..")]
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "regtrain-shards" / Path(*parts)


def checked_cache_folder(root: str, cache_dir: Optional[str]) -> Path:
    """``cache_folder``; a ConfigError, before anything is made, when the cache could not write its files there
    (a file, a folder it may not write) or would write them into a run folder, whose files are the run's own.
    Other files in it are no error: the cache leaves them as they are (``cache.py``)."""
    folder = cache_folder(root, cache_dir)
    named = f"data.args.cache_dir '{cache_dir}'" if cache_dir else f"the shard cache folder '{folder}'"
    problem = why_not_writable(folder)
    if problem is not None:
        fix = "give data.args.cache_dir a folder" if cache_dir else "set data.args.cache_dir to a folder"
        raise ConfigError(f"{named} {problem}; {fix} the shard cache can write (one of its own is best)")
    run = run_holding(folder)
    if run is not None:
        raise ConfigError(
            f"{named} lies inside the run folder '{run}', whose files are the run's own; give data.args.cache_dir a folder outside every run"
        )
    return folder


def open_split(
    root: str,
    split: str,
    cache_limit: Union[int, str] = DEFAULT_CACHE_LIMIT,
    cache_dir: Optional[str] = None,
    evict_lru: bool = False,
) -> "ShardReader":
    """The reader of ``split`` under ``root``, its index loaded: the one-line errors of the cache limit, of S3 and
    of the index come here, before any sample is read. Remote shards are cached under ``cache_folder``
    (``evict_lru``: for an order that reads shards window by window, ``cache.py``)."""
    limit = parse_size(cache_limit, "data.args.cache_limit")
    store = open_store(root)
    cache = ShardCache(checked_cache_folder(root, cache_dir), limit, store.download, evict_lru) if is_s3(root) else None
    index = load_index(store, split, cache)
    if cache is None:  # a missing local shard now, not when the epoch first reads it
        assert isinstance(store, LocalStore)
        missing = [shard.name for shard in index.shards if not store.path(f"{split}/{shard.name}").is_file()]
        if missing:
            raise DataError(
                f"shard '{store.path(f'{split}/{missing[0]}')}' is missing ({len(missing)} of the {len(index.shards)} "
                "shards of its index); restore it or pack the data again"
            )
    return ShardReader(store, index, cache)


class ShardReader:
    """The members of sample ``at``: local shards read in place, remote ones through the cache, or by byte
    range when the cache is full (``cache.py``).

    Every member read from a local shard, or by byte range, is checked against its own checksum in the
    index: each epoch hashes the bytes it reads once, where checking whole shards would hash every shard
    again in each DataLoader worker. A cached shard is checked whole when it arrives. A mismatch is a
    :class:`BadFile` naming the shard and the sample, so ``data.args.on_bad_sample`` decides as for an
    unreadable image.
    """

    def __init__(self, store: Store, index: Index, cache: Optional[ShardCache]) -> None:
        self.store, self.index, self.cache = store, index, cache
        self.where = f"{store.url}/{index.split}"  # how errors and sample names spell the split
        self.bad: Set[str] = set()  # cached shards that arrived corrupt, per process

    def _shard_url(self, shard: Shard) -> str:
        return f"{self.where}/{shard.name}"

    def _cached(self, shard: Shard) -> Optional[Path]:
        """The cached copy of a remote shard, or None when the cache is full of shards in use."""
        assert self.cache is not None
        start_fill(self.cache, self.index.shards, self.index.split)
        if shard.name not in self.bad:
            try:
                return self.cache.get(shard, self.index.split, if_room=True)
            except ShardMismatch:
                self.bad.add(shard.name)
        raise BadFile(
            f"shard '{self._shard_url(shard)}' does not match its sha256 in {INDEX} (corrupt or changed since packing); "
            "restore it or pack again",
            skipped=f"a sample of the corrupt shard '{self._shard_url(shard)}'",
        )

    def _checked(self, shard: Shard, out: List[bytes], spans: np.ndarray, at: int) -> List[bytes]:
        """``out`` when each member matches its checksum; a BadFile naming the shard and the sample otherwise."""
        for data, digest in zip(out, spans["digest"].tolist()):
            if int.from_bytes(hashlib.sha256(data).digest()[:8], "little") != digest:
                key = self.index.key(at)
                raise BadFile(
                    f"shard '{self._shard_url(shard)}' does not match its checksums in {INDEX} at sample '{key}' "
                    "(corrupt or changed since packing); restore it or pack again",
                    skipped=f"sample '{key}' of the corrupt shard '{self._shard_url(shard)}'",
                )
        return out

    def _ranged(self, shard: Shard, spans: np.ndarray) -> List[bytes]:
        """The members at ``spans`` by one byte-range read of the remote shard."""
        offsets, sizes = spans["offset"].tolist(), spans["size"].tolist()
        start, end = min(offsets), max(o + n for o, n in zip(offsets, sizes))
        data = self.store.read_range(f"{self.index.split}/{shard.name}", start, end)
        return [data[o - start : o - start + n] for o, n in zip(offsets, sizes)]

    def members(self, at: int, which: Optional[List[int]] = None) -> List[bytes]:
        """The bytes of sample ``at``'s members, in order (only those numbered ``which``, when given: a clip's
        frames): the image (then its mask), or a video's frames."""
        spans = self.index.spans(at)
        if which is not None:
            spans = spans[which]
        shard = self.index.shards[int(self.index.samples["shard"][at])]
        if self.cache is None:
            assert isinstance(self.store, LocalStore)
            path = self.store.path(f"{self.index.split}/{shard.name}")
            try:
                return self._checked(shard, _read_spans(path, spans), spans, at)
            except FileNotFoundError:
                raise DataError(f"shard '{path}' is missing; restore it or pack the data again") from None
        for _ in range(3):  # a cached shard evicted by another process between get() and open(): fetched again
            cached = self._cached(shard)
            if cached is None:  # the cache is full of shards in use
                return self._checked(shard, self._ranged(shard, spans), spans, at)
            try:
                return _read_spans(cached, spans)  # checked whole when it arrived
            except FileNotFoundError:
                continue
        raise DataError(f"shard '{shard.name}' keeps disappearing from the cache; raise data.args.cache_limit")


def _read_spans(path: Path, spans: np.ndarray) -> List[bytes]:
    """The members at ``spans`` (rows of offset and size) of the shard file at ``path``."""
    with open(path, "rb") as fh:
        out = []
        for offset, size in zip(spans["offset"].tolist(), spans["size"].tolist()):
            fh.seek(offset)
            out.append(fh.read(size))
        return out
