"""Reading one sample's members from its shard by byte range, through the index."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, List, Optional, Set, Union

from utils.data.bad_samples import BadFile
from utils.data.shards.cache import ShardCache, ShardMismatch
from utils.data.shards.fill import start_fill
from utils.data.shards.index import INDEX, Index, Shard, parse_index
from utils.data.shards.sizes import parse_size
from utils.data.shards.store import LocalStore, Store, is_s3, open_store
from utils.errors import ConfigError, DataError
from utils.run_folder import run_holding
from utils.writable import why_not_writable

DEFAULT_CACHE_LIMIT = "10GB"


def load_index(store: Store, split: str) -> Index:
    """The split's index from ``store``; a one-line error when it is missing, of another version, or of another split."""
    where = f"{store.url}/{split}/{INDEX}"
    index = parse_index(store.read(f"{split}/{INDEX}"), where)
    if index.split != split:
        raise DataError(f"shard index '{where}' is of split '{index.split}', not '{split}'; pack the data again")
    return index


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
    index = load_index(store, split)
    cache = ShardCache(checked_cache_folder(root, cache_dir), limit, store.download, evict_lru) if is_s3(root) else None
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

    def _checked(self, shard: Shard, out: Dict[str, bytes], spans: Dict[str, List], key: str) -> Dict[str, bytes]:
        """``out`` when each member matches its checksum; a BadFile naming the shard and the sample otherwise."""
        for name, (_, _, digest) in spans.items():
            if hashlib.sha256(out[name]).hexdigest()[:16] != digest:
                raise BadFile(
                    f"shard '{self._shard_url(shard)}' does not match its checksums in {INDEX} at sample '{key}' "
                    "(corrupt or changed since packing); restore it or pack again",
                    skipped=f"sample '{key}' of the corrupt shard '{self._shard_url(shard)}'",
                )
        return out

    def _ranged(self, shard: Shard, spans: Dict[str, List]) -> Dict[str, bytes]:
        """The members in ``spans`` by one byte-range read of the remote shard."""
        start = min(offset for offset, _, _ in spans.values())
        end = max(offset + size for offset, size, _ in spans.values())
        data = self.store.read_range(f"{self.index.split}/{shard.name}", start, end)
        return {name: data[offset - start : offset - start + size] for name, (offset, size, _) in spans.items()}

    def members(self, at: int, names: Optional[List[str]] = None) -> Dict[str, bytes]:
        """``member name -> bytes`` of sample ``at`` (only ``names``, when given: a clip's frames)."""
        sample = self.index.samples[at]
        spans = sample["members"] if names is None else {name: sample["members"][name] for name in names}
        shard = self.index.shards[sample["shard"]]
        if self.cache is None:
            assert isinstance(self.store, LocalStore)
            path = self.store.path(f"{self.index.split}/{shard.name}")
            try:
                return self._checked(shard, _read_spans(path, spans), spans, sample["key"])
            except FileNotFoundError:
                raise DataError(f"shard '{path}' is missing; restore it or pack the data again") from None
        for _ in range(3):  # a cached shard evicted by another process between get() and open(): fetched again
            cached = self._cached(shard)
            if cached is None:  # the cache is full of shards in use
                return self._checked(shard, self._ranged(shard, spans), spans, sample["key"])
            try:
                return _read_spans(cached, spans)  # checked whole when it arrived
            except FileNotFoundError:
                continue
        raise DataError(f"shard '{shard.name}' keeps disappearing from the cache; raise data.args.cache_limit")


def _read_spans(path: Path, spans: Dict[str, List]) -> Dict[str, bytes]:
    """The members at ``spans`` (``name -> [offset, size, digest]``) of the shard file at ``path``."""
    with open(path, "rb") as fh:
        out = {}
        for name, (offset, size, _) in spans.items():
            fh.seek(offset)
            out[name] = fh.read(size)
        return out
