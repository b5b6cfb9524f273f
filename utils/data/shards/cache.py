"""A local cache of whole shards, bounded in bytes, least recently used evicted first.

Shared by the DataLoader workers and ranks of one machine: a download goes to a
temporary file renamed into place under a per-shard lock, so one process fetches a
shard while the others wait for it; recency is the file's modification time, touched on
every use. A file is named by its checksum, so a shard packed again is never mistaken
for the old one. A shard is checked against its sha256 once, when it arrives.

Admission: the framework's default order is a shuffle of the whole split, under which a cache
smaller than the data would fetch a whole shard for nearly every sample if it evicted on
every miss. So a shard is fetched only while it fits (after evicting shards unused for
``STALE_S``, e.g. of an earlier pack); once the cache is full of shards in use, the reader
reads a missing sample by byte range instead (``reader.py``). Under a shard-window order
(``data.args.shuffle_window``) the epoch reads its shards window after window, so a miss
evicts the least recently used shards instead (``evict_lru``): each shard is fetched whole,
once per epoch, when the cache holds a window or two.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import time
from pathlib import Path
from typing import Callable, Optional

from utils.data.shards.index import Shard
from utils.errors import DataError
from utils.files.checksum import file_digest
from utils.files.owned import make_dirs, open_file, remove, replace

log = logging.getLogger(__name__)
STALE_S = 600.0  # a cached shard unused this long makes room for another
FULL_RECHECK_S = 10.0  # how long a process trusts "the cache is full" before looking again
CACHED = re.compile(r"[0-9a-f]{20}-[^/]+\.tar")  # the name of a shard this cache wrote (``ShardCache.file``)
INDEX_COPY = re.compile(r"[0-9a-f]{20}-[^/]+\.npy")  # a copy of an index array (``ShardCache.index_file``)
DOWNLOAD = re.compile(r"\.([0-9a-f]{20}-[^/]+\.tar)\.([0-9]+)\.part")  # one on its way, by the process it names


class ShardMismatch(ValueError):
    """A fetched shard whose bytes do not match the sha256 its index gives (corrupt, or changed since packing)."""


class ShardCache:
    """``get(shard)``: the path of a verified local copy, fetched by ``fetch(name, dest)`` on a miss."""

    def __init__(self, folder: Path, limit: int, fetch: Callable[[str, Path], None], evict_lru: bool = False) -> None:
        self.folder, self.limit, self.fetch = folder, limit, fetch
        self.evict_lru = evict_lru  # the order reads shards window by window: least recently used goes first
        make_dirs(folder, folder)  # cache_dir: the user's to place; what lies inside is written by the cache only
        self._full_until = 0.0

    def file(self, shard: Shard, split: str) -> Path:
        return self.folder / f"{shard.sha256[:20]}-{split}-{shard.name}"

    def get(self, shard: Shard, split: str, if_room: bool = False) -> Optional[Path]:
        """The cached copy of ``shard``; None when ``if_room`` and it does not fit, or when its name would not be
        one the cache keeps (``CACHED``: a shard or split name pack never writes); a ShardMismatch when what arrived
        does not match its checksum (the store's own errors pass through: a missing shard is not a corrupt one)."""
        path = self.file(shard, split)
        if not CACHED.fullmatch(path.name) or path.parent != self.folder:  # then it could never be evicted
            return None
        if self._touch(path):
            return path
        if if_room and not self._room_for(shard.bytes):
            return None
        self._download(path, f"{split}/{shard.name}", shard.sha256)
        self._evict(keep=path, older_than=None)
        return path

    def index_file(self, file: Shard, split: str) -> Path:
        """A verified local copy of one of a split's index arrays (``file``: its name, checksum and size), which
        every process of the machine maps: kept beside the shards, never evicted and not counted in the limit
        (a few dozen bytes per sample). Its name comes from checked fields (``index.py``: 64 hex digits, the
        array's own name); a split that would lead it out of the folder is refused, never followed."""
        path = self.folder / f"{file.sha256[:20]}-{split}-{file.name}"
        if not INDEX_COPY.fullmatch(path.name) or path.parent != self.folder:
            raise DataError(
                f"split '{split}' cannot name a file of the shard cache '{self.folder}'; name a packed split"
            )
        if path.is_symlink() or not path.is_file():
            self._download(path, f"{split}/{file.name}", file.sha256)
        return path

    def _download(self, path: Path, name: str, sha256: str) -> None:
        """``name`` of the store to ``path``, checked against ``sha256``: one download per file on this machine
        (the others wait on its lock, then find it); a ShardMismatch when what arrived does not match."""
        with open_file(self.folder, path.with_name(path.name + ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if path.is_file() and not path.is_symlink():
                return
            tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
            try:
                remove(self.folder, tmp)  # a leftover (or a link): the fetch writes a new file
                self.fetch(name, tmp)
                if file_digest(tmp) != sha256:
                    raise ShardMismatch(name)
                replace(self.folder, tmp, path)  # a link at the name is replaced, with a warning
            finally:
                remove(self.folder, tmp)

    @staticmethod
    def _touch(path: Path) -> bool:
        """Mark ``path`` used; whether it is a copy of the cache's own (a link is not: fetched again in its place)."""
        if path.is_symlink():
            return False
        try:
            os.utime(path, follow_symlinks=False)
            return True
        except FileNotFoundError:
            return False

    def _room_for(self, size: int) -> bool:
        """Whether ``size`` more bytes fit, after evicting shards unused for ``STALE_S``."""
        if self.evict_lru:
            return self._evict(keep=None, older_than=None, room=size)
        if time.monotonic() < self._full_until:
            return False
        if self._evict(keep=None, older_than=time.time() - STALE_S, room=size):
            return True
        self._full_until = time.monotonic() + FULL_RECHECK_S
        return False

    def _evict(self, keep: Optional[Path], older_than: Optional[float], room: int = 0) -> bool:
        """Removes the least recently used shards (only those last used before ``older_than``, when given;
        never ``keep``) until ``room`` more bytes fit the limit; whether they do."""
        files = []
        for entry in os.scandir(self.folder):
            try:
                if not entry.is_file(follow_symlinks=False):  # a folder or a link is never the cache's
                    continue
                download = DOWNLOAD.fullmatch(entry.name)
                if download is not None and _writer_gone(int(download.group(2))):
                    remove(self.folder, Path(entry.path))  # left by a process that died mid-download
                if CACHED.fullmatch(entry.name):
                    stat = entry.stat(follow_symlinks=False)
                    files.append((stat.st_mtime, stat.st_size, Path(entry.path)))
            except FileNotFoundError:  # evicted by another process meanwhile
                continue
        total = sum(size for _, size, _ in files)
        for used, size, path in sorted(files):
            if total + room <= self.limit or (older_than is not None and used >= older_than):
                break
            if path != keep:
                remove(self.folder, path)  # a reader holding it open keeps reading (POSIX)
                total -= size
        return total + room <= self.limit


def _writer_gone(pid: int) -> bool:
    """Whether the process named in a download's temporary file (``.<name>.<pid>.part``) has ended."""
    try:
        os.kill(pid, 0)
    except (ValueError, OverflowError):  # no process could have that number
        return False
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process: alive
        return False
    return False
