"""One process at a time trains in a run folder: the lock of ``RunFolder.lock`` (``utils/run/folder.py``).

Rank 0 holds an exclusive ``fcntl.flock`` on the folder's ``.lock`` for the whole
run. The kernel releases it when the process ends, however it ends (``kill -9``
included), so a stale lock never blocks a later run. The file names the holder
(PID and host) for the error a second process sees. It is opened with ``O_NOFOLLOW``
(``utils/files/owned.py``): a ``.lock`` that is a link is replaced, its target never truncated.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path

from utils.errors import ConfigError, OutputError
from utils.files.owned import open_fd


def take_lock(lock_file: Path, folder: Path) -> int:
    """Take the lock ``lock_file`` of the run folder ``folder`` and write this process's PID and host into it; the
    open descriptor that holds it. ConfigError when another process holds it, OutputError when the lock cannot be
    opened (a read-only folder)."""
    try:
        fd = open_fd(folder, lock_file, os.O_RDWR | os.O_CREAT)
    except OSError as err:  # a read-only or foreign folder: training could not write its checkpoints there either
        raise OutputError(
            f"cannot take the lock '{lock_file}' of run folder '{folder}' ({err.strerror or err}); "
            "make the folder writable (or copy the run somewhere writable and resume the copy)"
        ) from err
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        raise ConfigError(
            f"run folder '{folder}' is in use by another run ({_holder(lock_file)}; lock '{lock_file}'); "
            "wait until that run ends and continue it with --resume, or start a fresh run (without --resume)"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}\nhost {socket.gethostname()}\n".encode())
    os.fsync(fd)
    return fd


def _holder(lock_file: Path) -> str:
    try:
        fields = dict(line.split(" ", 1) for line in lock_file.read_text().splitlines() if " " in line)
    except OSError:
        fields = {}
    return f"pid {fields.get('pid', '?')} on host {fields.get('host', '?')}"


def release_lock(fd: int) -> None:
    """Let the next process in (the file stays: removing it would race with one taking it)."""
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
