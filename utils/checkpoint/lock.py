"""One run per output folder: rank 0 holds an exclusive lock on ``output/<experiment>/`` for the whole run.

Two runs with one ``experiment.name`` would write into each other's checkpoints,
and the second would test the first's ``best.pt``. The lock is an ``fcntl.flock``
on ``<folder>/.lock``: the kernel releases it when the process ends, however it
ends (``kill -9`` included), so a stale lock never blocks a later run.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from pathlib import Path
from typing import Optional

from utils.errors import ConfigError

LOCK_NAME = ".lock"


class RunLock:
    """The lock of one output folder; ``acquire`` raises ConfigError when another process holds it."""

    def __init__(self, folder: Path, experiment: str) -> None:
        self.path = Path(folder) / LOCK_NAME
        self.experiment = experiment
        self._fd: Optional[int] = None

    def acquire(self) -> None:
        """Take the lock and write this process's PID and host into the lock file."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            os.close(fd)
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise
            raise ConfigError(
                f"experiment '{self.experiment}' is in use by another run ({self._holder()}; lock '{self.path}'); "
                "use another experiment.name, or wait until that run ends and continue it with --resume"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}\nhost {socket.gethostname()}\n".encode())
        os.fsync(fd)
        self._fd = fd

    def _holder(self) -> str:
        try:
            fields = dict(line.split(" ", 1) for line in self.path.read_text().splitlines() if " " in line)
        except OSError:
            fields = {}
        return f"pid {fields.get('pid', '?')} on host {fields.get('host', '?')}"

    def release(self) -> None:
        """Let the next run in (the file stays: removing it would race with a run taking it)."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
