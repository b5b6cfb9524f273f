"""Test-only: number the checkpoint store's file operations, and SIGKILL the process at one of them.

Loaded into ``main.py`` with ``custom_imports=[tests.checkpoint.kill_points]``. The
operations are the steps that change what a crash leaves behind: the start of a
checkpoint's bytes (``data``), every rename (``replace``: checkpoint files, links, validation
records) and every hard link (``link``).

- ``REGTRAIN_TRACE_OPS=<file>``: append one line per operation, ``<n> <kind> <file name>``.
- ``REGTRAIN_KILL_AT=<n>``: SIGKILL this process at operation ``n`` (before a rename or
  link; for ``data``, once ``REGTRAIN_KILL_BYTES`` (default 20000) bytes of the file are written).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import SimpleNamespace

from utils.checkpoint import files, records, store

_count = 0
_KILL_AT = int(os.environ.get("REGTRAIN_KILL_AT", "0"))
_KILL_BYTES = int(os.environ.get("REGTRAIN_KILL_BYTES", "20000"))
_TRACE = os.environ.get("REGTRAIN_TRACE_OPS")


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _operation(kind: str, target: object) -> bool:
    """Count one operation; True when it is the one to kill at."""
    global _count
    _count += 1
    if _TRACE:
        with open(_TRACE, "a") as fh:
            fh.write(f"{_count} {kind} {Path(str(target)).name}\n")
    return _count == _KILL_AT


def _replace(src: object, dst: object) -> None:
    if _operation("replace", dst):
        _kill()
    os.replace(src, dst)


def _link(src: object, dst: object) -> None:
    if _operation("link", src):
        _kill()
    os.link(src, dst)


_real_serialize = files._serialize


def _serialize(obj: object, fd: int) -> str:
    kill = _operation("data", "-")
    if kill:
        real_write = files.HashingWriter.write

        def write(self: files.HashingWriter, data: object) -> int:
            written = real_write(self, data)
            if self.size >= _KILL_BYTES:
                os.fsync(self.raw.fileno())  # the partial bytes reach the file, as they would before a crash
                _kill()
            return written

        files.HashingWriter.write = write
    return _real_serialize(obj, fd)


_os = SimpleNamespace(**{name: getattr(os, name) for name in dir(os) if not name.startswith("__")})
_os.replace, _os.link = _replace, _link
files.os = store.os = records.os = _os
files._serialize = _serialize
