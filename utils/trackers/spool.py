"""A tracker's spool in the run folder: every record the run gives a tracker, kept before it is sent.

``trackers/<name>.jsonl`` holds the records, one JSON object a line, appended by the training process (a line
is written whole with its newline, so a kill -9 leaves at most one line cut short, which the next opening
drops: it was never sent). ``trackers/<name>.json`` holds the tracker run's identity (its id, where it lives)
and ``sent``: the byte offset up to which the tracker has every record. What lies after ``sent`` waits; the
sender (``sender.py``) sends it in order, also after an outage, a kill or in ``python -m utils.trackers sync``.

A record is one of::

    {"t": <ms>, "step": S, "metrics": {key: value}}   values at optimizer step S
    {"t": <ms>, "params": {key: value}}               the resolved config, flattened (once a tracker run)
    {"t": <ms>, "tags": {key: value}}                 the run folder, the best checkpoint, the test line, a sweep
    {"t": <ms>, "status": "RUNNING" | "FINISHED" | "FAILED"}
    {"t": <ms>, "artifact": PATH}                     a file to upload (``log_checkpoints``), relative to the run folder

A line that is no such record (``records.py`` checks each line read, in one place) is skipped and counted; an
``artifact`` must name a file inside the run folder. The identity is checked when it is read (``identity.py``).

The spool also remembers, for every metric, the last step it holds (``last_step``): a resumed run replays the
steps after its checkpoint, and those the interrupted process already logged are not logged twice.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from utils.errors import OutputError
from utils.files.owned import check_file, make_dirs, open_file, write_text
from utils.trackers.identity import read_identity
from utils.trackers.records import Record, checked_record, is_number

log = logging.getLogger(__name__)

FOLDER = "trackers"  # inside the run folder
SWEEP_PARENT = "mlflow-sweep-"  # the start of a sweep's parent-run files (sweep_parent.py), beside spools
BATCH_BYTES = 1 << 20  # what one send reads from the spool at most


def identity_file(run: Path, name: str) -> Path:
    """The identity file of tracker ``name`` of the run folder ``run`` (a ``Spool``'s ``identity_path``)."""
    return Path(run) / FOLDER / f"{name}.json"


def tracker_names(folder: Path) -> List[str]:
    """The trackers whose spools ``folder`` (a run's ``trackers/``) holds, by their identity files (a sweep's parent
    files are no spool: a run folder of the old layout is its experiment's folder too)."""
    return sorted(path.stem for path in Path(folder).glob("*.json") if not path.name.startswith(SWEEP_PARENT))


def parse(line: bytes, run: Path, origin: Optional[str] = None) -> Optional[Record]:
    """One line's record; None for a blank line or one that is no record of the schema above (``records.py``; said
    where the file is read). ``run``: the run folder, where an ``artifact`` must lie; ``origin``: the folder the
    spool was made in (a whole artifact path inside it is re-rooted into ``run``)."""
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return checked_record(value, run, origin)


def now_ms() -> int:
    return int(time.time() * 1000)


class Spool:
    """The records and the identity of one tracker of one run folder (``folder`` is ``<run>/trackers``)."""

    def __init__(self, folder: Path, name: str) -> None:
        self.folder = Path(folder)
        self.name = name
        self.records_path = self.folder / f"{name}.jsonl"
        self.identity_path = self.folder / f"{name}.json"
        self.run = self.folder.parent  # the run folder: an artifact record names a file inside it
        self.identity: Dict[str, Any] = read_identity(self.identity_path)
        # the folder the spool was made in, as its identity named it when opened (a move renames it after): an
        # artifact record of an earlier version names a whole path there
        self.origin: Optional[str] = self.identity.get("folder")
        self.last_step: Dict[str, int] = {}
        self.params: Optional[Dict[str, Any]] = None  # the params record, once the spool holds one
        self.status: Optional[str] = None  # the last status record's
        self._lock = threading.Lock()  # the identity file: the sender and the training thread both save it
        self._scan()
        self._out: Any = None

    def __repr__(self) -> str:
        return f"Spool({str(self.records_path)!r})"

    @property
    def sent(self) -> int:
        return int(self.identity.get("sent", 0))

    def _scan(self) -> None:
        """Learn each metric's last step, the params and the status; drop a last line cut short by a kill."""
        if self.folder.is_dir() and not self.folder.is_symlink():
            check_file(self.folder.parent, self.records_path)  # a link: replaced (a warning), never read or cut
        if not self.records_path.is_file():
            return
        data = self.records_path.read_bytes()
        whole = data.rfind(b"\n") + 1
        if whole < len(data):  # cut short while written: never sent, the replay writes it again
            with open_file(self.folder.parent, self.records_path, "r+b") as handle:
                handle.truncate(whole)
            log.warning("tracker %s: dropped a record cut short in %s", self.name, self.records_path)
        bad = 0
        for line in data[:whole].splitlines():
            record = parse(line, self.run, self.origin)
            if record is None:
                bad += line.strip() != b""
            else:
                self._note(record)
        if bad:
            log.warning(
                "tracker %s: %d line(s) of %s are no record; they are skipped", self.name, bad, self.records_path
            )
        sent = self.sent
        if sent > whole or (sent and data[sent - 1 : sent] != b"\n"):  # the file was replaced or cut: send it whole
            log.warning(
                "tracker %s: %s changed since its records were sent (%d bytes sent, %d there); all of it goes again",
                self.name,
                self.records_path,
                sent,
                whole,
            )
            self.identity["sent"] = 0

    def _note(self, record: Record) -> None:
        if "metrics" in record:
            step = record["step"]
            for key in record["metrics"]:
                self.last_step[key] = max(step, self.last_step.get(key, step))
        elif "params" in record:
            self.params = record["params"]
        elif "status" in record:
            self.status = record["status"]

    def save_identity(self, **values: Any) -> None:
        """Update the identity file with ``values`` (written whole: a kill leaves the old one or the new one)."""
        with self._lock:
            self.identity.update(values)
            make_dirs(self.folder.parent, self.folder)
            write_text(
                self.folder.parent,
                self.identity_path,
                json.dumps(self.identity, indent=1),
                "free space in the run folder",
            )

    def append(self, record: Record) -> None:
        """Add ``record`` as the last line (its time stamped now unless it has one)."""
        record.setdefault("t", now_ms())
        if self._out is None:
            make_dirs(self.folder.parent, self.folder)
            self._out = open_file(
                self.folder.parent, self.records_path, "a", buffering=1
            )  # line-buffered: each record reaches the file
        try:
            self._out.write(json.dumps(record) + "\n")
        except OSError as err:
            raise OutputError.writing(self.records_path, err) from err
        self._note(record)

    def new_values(self, step: int, values: Dict[str, Any]) -> Dict[str, float]:
        """The numbers of ``values`` not yet logged at ``step`` or later: what a resumed run replays is left out."""
        return {
            key: float(value)
            for key, value in values.items()
            if is_number(value) and step > self.last_step.get(key, -1)
        }

    def pending(self, start: int) -> Tuple[List[Record], int]:
        """The records after offset ``start`` (at most ``BATCH_BYTES`` of them, whole lines) and the offset after them."""
        if not self.records_path.is_file():
            return [], start
        with open(self.records_path, "rb") as handle:
            handle.seek(start)
            data = handle.read(BATCH_BYTES)
        end = data.rfind(b"\n") + 1
        if end == 0 and len(data) == BATCH_BYTES:  # one record longer than a batch: read it whole
            with open(self.records_path, "rb") as handle:
                handle.seek(start)
                data = handle.readline()
            end = len(data) if data.endswith(b"\n") else 0
        records = [parse(line, self.run, self.origin) for line in data[:end].splitlines()]
        return [record for record in records if record is not None], start + end

    def waiting(self) -> int:
        """How many records wait to be sent (the lines ``pending`` gives)."""
        if not self.records_path.is_file():
            return 0
        with open(self.records_path, "rb") as handle:
            handle.seek(self.sent)
            return sum(1 for line in handle if line.endswith(b"\n") and parse(line, self.run, self.origin) is not None)

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
