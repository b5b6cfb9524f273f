"""Sends a spool's records to its tracker from a background thread: the training loop never waits for a server.

The thread opens the tracker run at once, then wakes every ``interval`` seconds (or when asked) and sends what
waits in the spool in order, a batch at a time; ``sent`` moves only once the tracker keeps a batch for good. A
failure keeps the records in the spool and is said once, as what it is:

- an outage (no answer, a timeout, a server error): a warning, then attempts with a growing pause (up to
  ``MAX_PAUSE``); when the tracker answers again, one line says so and what waited goes;
- a refusal (the tracker answered that it will not take these records: a deleted experiment, a login): one
  error line with the tracker's reason; the records stay for ``python -m utils.trackers sync`` once fixed;
- this side's own failure (the identity file unwritable on a full disk, a bad file in the run folder): one error
  line naming it;
- anything else is a bug, here or in the tracker's library: one error line with its traceback.

``close`` gives the thread ``timeout`` seconds to send the rest (none when the tracker is already known to be
down: the run does not wait for a server that did not answer), then says how many records still wait and why.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional, Protocol, Sequence, Tuple

from utils.errors import UserError
from utils.secret_text import masked
from utils.trackers.spool import Record, Spool

log = logging.getLogger(__name__)

MAX_PAUSE = 30.0  # seconds between attempts while the tracker is unreachable


class RefusedError(Exception):
    """A tracker refused what it was given, for a reason its message names: trying again will not help."""


class Backend(Protocol):
    """A tracker's client: ``open`` creates or continues the run the spool's identity names, ``send`` gives it
    records in order; both raise on any failure (the sender keeps the records and tries again)."""

    name: str
    where: str  # the server or folder, for messages

    def outages(self) -> Tuple[type, ...]:
        """The exceptions the tracker's client raises for a failure of the tracker, not of this code."""

    def failure(self, err: BaseException) -> str:
        """``outage`` or ``refused``, for one of ``outages()``."""

    def open(self, spool: Spool) -> None: ...

    def send(self, records: Sequence[Record]) -> bool:
        """Whether everything sent so far is kept by the tracker for good (then ``sent`` moves)."""

    def close(self) -> bool:
        """Release the client; whether everything sent is then kept for good."""


def sync_hint(run: Any) -> str:
    return f"the next --resume of the run with this hook sends them, or: python -m utils.trackers sync {run}"


class Sender:
    """One thread per tracker of a run (rank 0), sending ``spool`` through ``backend``."""

    def __init__(self, spool: Spool, backend: Backend, interval: float = 1.0) -> None:
        self.spool, self.backend, self.interval = spool, backend, interval
        self._wake = threading.Event()
        self._stopping = False
        self._opened = False
        self._down: Optional[str] = None  # what made the tracker fail, until it takes records again
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
            if stopping and self._down is not None:
                return  # down at the end: no wait for a server that did not answer
            try:
                self.send_waiting()
                pause = self.interval
            except Exception as err:  # the records wait either way; what it was is said once
                self._failed(err)
                pause = min(MAX_PAUSE, max(pause, self.interval) * 2)
            if stopping:
                return

    def send_waiting(self, more: Callable[[], bool] = lambda: True) -> int:
        """Send every waiting record, the tracker run opened first (when something waits); how many were sent."""
        count = 0
        while more():
            records, end = self.spool.pending(self._cursor)
            if not records:
                break
            if not self._opened:
                self.backend.open(self.spool)
                self._opened = True
            kept = self.backend.send(records)
            self._cursor = end
            if kept:
                self.spool.save_identity(sent=end)
            count += len(records)
        if self._down is not None:
            log.warning(
                "tracker %s: %s takes records again; those that waited are sent", self.backend.name, self.backend.where
            )
            self._down = None
        return count

    def kind(self, err: BaseException) -> str:
        """``outage``, ``refused``, ``local`` (bad input or a full disk on this side) or ``bug``."""
        if isinstance(err, RefusedError):
            return "refused"
        if isinstance(err, UserError):  # this side's: the spool's identity unwritable (a full disk), or bad
            return "local"
        return self.backend.failure(err) if isinstance(err, self.backend.outages()) else "bug"

    def what_failed(self, kind: str) -> str:
        """An ``outage`` or a refusal as the lines about it say it (the run's warning, ``sync``'s error)."""
        where = self.backend.where
        return f"{where} refused the records" if kind == "refused" else f"cannot reach {where}"

    def _failed(self, err: BaseException) -> None:
        if self._down is not None:
            return
        self._down = first_line(err)
        name, path = self.backend.name, self.spool.records_path
        kind = self.kind(err)
        if kind == "outage":
            log.warning(
                "tracker %s: %s (%s); training goes on, the records wait in %s and are sent when it is back",
                name,
                self.what_failed(kind),
                self._down,
                path,
            )
        elif kind == "refused":
            log.error(
                "tracker %s: %s (%s); training goes on, they wait in %s: fix that, then python -m utils.trackers "
                "sync RUN",
                name,
                self.what_failed(kind),
                self._down,
                path,
            )
        elif kind == "local":
            log.error(
                "tracker %s: %s; training goes on, the records wait in %s: fix that, then python -m utils.trackers "
                "sync RUN",
                name,
                self._down,
                path,
            )
        else:  # a bug here or in the tracker's library
            log.error(
                "tracker %s failed (%s); training goes on, the records wait in %s", name, self._down, path, exc_info=err
            )

    def close(self, timeout: float, run: Any) -> int:
        """Send what waits (``timeout`` seconds at most; none when the tracker is down), stop the thread, release the
        client; the records still waiting, said with why."""
        self._stopping = True
        self._wake.set()
        try:
            self._thread.join(timeout)
        except KeyboardInterrupt:  # a second Ctrl-C while the last records go: they stay in the spool
            log.warning("tracker %s: stopped while sending the last records", self.backend.name)
        if not self._thread.is_alive():
            self.finish()
        waiting = self.spool.waiting()
        if waiting:
            why = self._down or f"not sent within flush_timeout={timeout:g} s"
            log.warning(
                "tracker %s: %d record(s) wait in %s (%s: %s); %s",
                self.backend.name,
                waiting,
                self.spool.records_path,
                self.backend.where,
                why,
                sync_hint(run),
            )
        return waiting

    def finish(self) -> None:
        """Release the client; what it then keeps for good counts as sent (a W&B run's files, written whole)."""
        try:
            kept = self._opened and self.backend.close()
        except Exception as err:  # its release failed: the records stay for the next try
            self._failed(err)
            return
        if kept and self._cursor > self.spool.sent:
            self.spool.save_identity(sent=self._cursor)


def first_line(err: BaseException) -> str:
    """The first line of ``err``'s message, a password in a URL it names masked (a client's message names the
    request's URL with it)."""
    text = masked(str(err)).strip().splitlines()
    return (text[0] if text else type(err).__name__)[:300]
