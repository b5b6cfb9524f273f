"""Sends a spool's records to its tracker from a background thread: the training loop never waits for a server.

The thread wakes every ``interval`` seconds (or when asked), opens the tracker run if it is not open yet, and sends
what waits in the spool in order, a batch at a time; ``sent`` moves only after the tracker took a batch. When the
tracker cannot be reached it warns once, keeps the records in the spool and tries again with a growing pause
(up to ``MAX_PAUSE``); when it is back it says so once and sends what waited. ``close`` gives the thread
``timeout`` seconds to send the rest and says how many records still wait, and how they will be sent.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional, Protocol, Sequence, Tuple

from utils.trackers.spool import Record, Spool

log = logging.getLogger(__name__)

MAX_PAUSE = 30.0  # seconds between attempts while the tracker is unreachable


class Backend(Protocol):
    """A tracker's client: ``open`` creates or continues the run the spool's identity names, ``send`` gives it
    records in order; both raise on any failure (the sender keeps the records and tries again)."""

    name: str
    where: str  # the server or folder, for messages

    def outages(self) -> Tuple[type, ...]: ...

    def open(self, spool: Spool) -> None: ...

    def send(self, records: Sequence[Record]) -> bool:
        """Whether everything sent so far is kept by the tracker for good (then ``sent`` moves)."""

    def close(self) -> None: ...


def sync_hint(run: Any) -> str:
    return f"the next --resume of the run sends them, or: python -m utils.trackers sync {run}"


class Sender:
    """One thread per tracker of a run (rank 0), sending ``spool`` through ``backend``."""

    def __init__(self, spool: Spool, backend: Backend, interval: float = 1.0) -> None:
        self.spool, self.backend, self.interval = spool, backend, interval
        self._wake = threading.Event()
        self._stopping = False
        self._opened = False
        self._down: Optional[str] = None  # the error that made the tracker unreachable, until it is back
        self._cursor = spool.sent  # what this process gave the tracker; ``sent``: what the tracker keeps for good
        self._thread = threading.Thread(target=self._loop, name=f"tracker-{backend.name}", daemon=True)

    def start(self) -> "Sender":
        self._thread.start()
        return self

    def wake(self) -> None:
        self._wake.set()

    def _loop(self) -> None:
        pause = 0.0  # open the tracker run at once: the records of the first steps go as they come
        while True:
            self._wake.wait(pause)
            self._wake.clear()
            stopping = self._stopping
            try:
                self.send_waiting()
                pause = self.interval
            except Exception as err:  # the records wait either way; a bug is said with its traceback
                self._went_down(err, isinstance(err, self.backend.outages()))
                pause = min(MAX_PAUSE, max(pause, self.interval) * 2)
            if stopping:
                return

    def send_waiting(self, more: Callable[[], bool] = lambda: True) -> int:
        """Open the tracker run if needed, then send every waiting record; how many were sent."""
        if not self._opened:
            self.backend.open(self.spool)
            self._opened = True
        count = 0
        while more():
            records, end = self.spool.pending(self._cursor)
            if not records:
                break
            kept = self.backend.send(records)
            self._cursor = end
            if kept:
                self.spool.save_identity(sent=end)
            count += len(records)
        if self._down is not None:
            log.warning(
                "tracker %s: %s is reachable again; the records that waited are sent",
                self.backend.name,
                self.backend.where,
            )
            self._down = None
        return count

    def _went_down(self, err: BaseException, outage: bool) -> None:
        if self._down is None:
            self._down = str(err)
            if outage:
                log.warning(
                    "tracker %s: cannot reach %s (%s); training goes on, the records wait in %s and are sent when it is back",
                    self.backend.name,
                    self.backend.where,
                    first_line(err),
                    self.spool.records_path,
                )
            else:  # not an outage: a bug here or in the tracker's library
                log.error(
                    "tracker %s failed (%s); training goes on, the records wait in %s",
                    self.backend.name,
                    first_line(err),
                    self.spool.records_path,
                    exc_info=err,
                )

    def close(self, timeout: float, run: Any) -> int:
        """Send what waits (``timeout`` seconds at most), stop the thread; the records still waiting (said)."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout)
        waiting = self.spool.waiting()
        if waiting:
            log.warning(
                "tracker %s: %d record(s) wait in %s (%s unreachable); %s",
                self.backend.name,
                waiting,
                self.spool.records_path,
                self.backend.where,
                sync_hint(run),
            )
        if not self._thread.is_alive():
            self.backend.close()
        return waiting


def first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:200]
