"""Checkpoint files: the write path (serialize, hash, fsync, rename); ``readers.py`` loads them with clear errors.

``write_checkpoint`` is the whole write path of one file in one function: it
touches only its target, the target's ``.sha256`` and their temporaries, so it
can run in a background thread. The SHA-256 is computed from the bytes as
``torch.save`` writes them, never by reading the file back. Every name is written,
renamed and removed through ``utils/files/owned.py`` (never through a link; the
checkpoint folder's run folder is the root).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, List, Optional, Set, Tuple, Union

import numpy as np
import torch

from utils.files.checksum import file_digest  # noqa: F401  # the checkpoint modules' checksum, named here as before
from utils.files.owned import make_dirs, open_fd, remove, replace, write_text
from utils.tree import tensors_in

log = logging.getLogger(__name__)

# Writes at least this large are hashed on a helper thread while the file and torch go on.
_OVERLAP_BYTES = 1 << 20


def sidecar(path: Path) -> Path:
    """The file holding ``path``'s SHA-256 (hex): ``<name>.sha256`` next to it."""
    return path.with_name(path.name + ".sha256")


def stable_addresses(obj: Any) -> Set[int]:
    """Start addresses of the CPU tensor storages in ``obj`` (any container, ``utils/tree.py``): memory that
    stays as it is while ``torch.save`` writes it, so it can be hashed after the write returns."""
    return {
        t.untyped_storage().data_ptr()
        for t in tensors_in(obj)
        if t.device.type == "cpu" and t.untyped_storage().nbytes()
    }


class HashingWriter:
    """A binary file object for ``torch.save`` that hashes every byte it writes, on a helper thread.

    The bytes are hashed in order by one worker (hashlib releases the GIL), while
    the file writes, torch's own work and the final fsync go on: a tensor's
    storage (``stable``) is hashed from its own memory after ``write`` returned;
    any other buffer torch may reuse, so a small one is copied and a large one
    is waited for. It remembers the first OSError of the file (a full disk):
    torch reports a failed write as a RuntimeError ("unexpected pos ..."), and
    the caller wants the real cause.
    """

    def __init__(self, raw: Any, stable: Optional[Set[int]] = None) -> None:
        self.raw = raw  # an unbuffered binary file
        self.stable = stable or set()
        self.sha = hashlib.sha256()
        self.size = 0
        self.error: Optional[OSError] = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="checkpoint-sha256")
        self._small = bytearray()

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        wait = None
        if len(view) < _OVERLAP_BYTES:
            self._small += view  # small records (pickle, zip headers) are copied and hashed in batches
            if len(self._small) >= _OVERLAP_BYTES:
                self._flush_small()
        else:
            self._flush_small()  # keep the order of the bytes
            if np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0] in self.stable:
                self._pool.submit(self.sha.update, view)
            else:
                wait = self._pool.submit(self.sha.update, view)
        try:
            self._write_all(view)
        except OSError as err:
            self.error = self.error or err
            raise
        finally:
            if wait is not None:
                wait.result()  # torch may reuse this buffer once we return
        self.size += len(view)
        return len(view)

    def _flush_small(self) -> None:
        if self._small:
            self._pool.submit(self.sha.update, bytes(self._small))
            self._small = bytearray()

    def _write_all(self, view: memoryview) -> None:
        done = 0
        while done < len(view):  # a raw file may write less than asked (a full disk raises on the next call)
            done += self.raw.write(view[done:])

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        """Stop hashing (after a failure: what is queued no longer matters)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def hexdigest(self) -> str:
        """The SHA-256 of everything written, once the queued bytes are hashed."""
        self._flush_small()
        self._pool.shutdown(wait=True)
        return self.sha.hexdigest()


def fsync_dir(directory: Path) -> None:
    """Make the renames and links inside ``directory`` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """Write a small file through a temporary file, fsync, rename (OutputError, an OSError, when the disk refuses)."""
    write_text(path.parent, path, text, "resume with --resume", sync=True)


def _serialize(obj: Any, fd: int) -> str:
    """``torch.save`` into the open file ``fd``, hashing as it writes, then fsync; the SHA-256."""
    with os.fdopen(fd, "wb", buffering=0) as raw:
        writer = HashingWriter(raw, stable_addresses(obj))
        try:
            torch.save(obj, writer)
            os.ftruncate(raw.fileno(), writer.size)  # a recycled file was longer: cut its old tail
            os.fsync(raw.fileno())  # while the last bytes are hashed
            return writer.hexdigest()
        except RuntimeError as err:
            if writer.error is None:  # not a failed write: a bug, keep it as it is
                raise
            raise writer.error from err  # torch's "unexpected pos" hides the file's own error (ENOSPC, EIO)
        finally:
            writer.close()


def write_checkpoint(obj: Any, path: Union[str, Path], recycle: Optional[Path] = None) -> str:
    """Write ``obj`` to ``path`` with its ``.sha256``; returns the SHA-256.

    The bytes go to a temporary file (hashed as they are written), are fsynced,
    the checksum is written next to the target, and only then is the temporary
    file renamed to ``path``: a checkpoint that exists under its name is complete
    and has its checksum. A crash or a failed write (OSError, also a short write
    that torch reports as a RuntimeError) leaves any earlier file at ``path``
    as it was and removes the temporary file.

    ``recycle``: a file the caller is about to delete anyway (no other name may link
    to it). It becomes the temporary file and is overwritten in place, not truncated
    (its old tail is cut at the end): the file system rewrites blocks it already has,
    where a new file of hundreds of MB next to one being freed costs it about as much
    again as the write itself.
    """
    return write_hashed(path, lambda fd: _serialize(obj, fd), recycle)


def write_hashed(path: Union[str, Path], serialize: Callable[[int], str], recycle: Optional[Path] = None) -> str:
    """The write path of ``write_checkpoint`` for any bytes: ``serialize(fd)`` writes and fsyncs the open
    temporary file ``fd`` and returns the SHA-256 of what it wrote; then the ``.sha256``, the rename."""
    path = Path(path)
    folder = path.parent
    make_dirs(folder.parent, folder)  # a link at the checkpoint folder: refused (LinkError)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)  # new, O_EXCL: never a link
    if recycle is not None and not recycle.is_symlink():  # a link is never written through: a new file instead
        os.close(fd)
        # its name is gone at once: never a half-rewritten checkpoint under a checkpoint's name
        replace(folder, recycle, tmp)
        # not truncated: its blocks are overwritten where they are, none freed and allocated again
        fd = open_fd(folder, tmp, os.O_WRONLY)
    try:
        digest = serialize(fd)
        write_text_atomic(sidecar(path), digest)
        replace(folder, tmp, path)
    except BaseException:
        remove(folder, tmp)
        raise
    fsync_dir(path.parent)
    return digest


def atomic_save(obj: Any, path: Union[str, Path]) -> None:
    """``write_checkpoint`` for callers that do not need the checksum."""
    write_checkpoint(obj, path)


def newest_first(directory: Path, name: "re.Pattern[str]") -> List[Path]:
    """The entries of ``directory`` whose names ``name`` matches (epoch, batch), furthest into training first."""
    if not directory.is_dir():
        return []
    found: List[Tuple[Tuple[int, int], Path]] = []
    for path in directory.iterdir():
        match = name.match(path.name)
        if match:
            found.append(((int(match.group(1)), int(match.group(2))), path))
    return [path for _, path in sorted(found, reverse=True)]
