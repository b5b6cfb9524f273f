"""A study journal (Optuna's JournalStorage file) that a crash cut short, repaired before Optuna reads it.

Optuna writes each record as one JSON line under the journal's lock. A process killed inside that write leaves
a cut last line; Optuna reads past it, but its next write goes on the end of the cut line, which then is not
JSON, and every later read of the journal fails. So before the study opens, under the same lock: the bytes
after the last newline (a cut record) are dropped, and a line that is a cut record with a whole one written
onto its end keeps the whole one. Only a journal is rewritten: a cut record starts as Optuna's records start
(``{"op_code":``), and any other end (a user's text file named as the storage) refuses the file in one line.
Complete records are never dropped: a line damaged any other way is named in one error line and the file is
left as it is. The repaired journal replaces the old one whole (a temporary
file renamed over it), so a crash during the repair leaves one or the other.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, List, Optional, Tuple

from utils.errors import ConfigError
from utils.files.owned import write_bytes

log = logging.getLogger(__name__)

ADVICE = "run the sweep again"
# how Optuna writes every record (``JournalStorage``: ``{"op_code": N, "worker_id": ...}``, one JSON line)
RECORD_START = b'{"op_code":'


def repair_journal(path: Path, lock: Any) -> None:
    """Drop the cut records of the journal at ``path`` (a warning names the file and what was dropped), holding
    ``lock`` (the journal's own: Optuna's writers hold it while they write); ConfigError for other damage."""
    if not path.is_file() or not repaired(path.read_bytes(), path)[1]:
        return  # whole (read without the lock: a write under way shows only as a cut end, looked at again below)
    lock.acquire()
    try:
        kept, dropped = repaired(path.read_bytes(), path)
        if dropped:
            write_bytes(path.parent, path, kept, ADVICE, sync=True)
    finally:
        lock.release()
    if dropped:
        log.warning(
            "study journal %s: dropped %d record(s) a crash cut short (%s); its complete records are kept",
            path,
            len(dropped),
            ", ".join(_shown(part) for part in dropped),
        )


def repaired(data: bytes, path: Path) -> Tuple[bytes, List[bytes]]:
    """(the journal without its cut records, the cut records); ConfigError naming a line damaged otherwise."""
    *lines, tail = data.split(b"\n")
    if tail and not _starts_as_record(tail):
        raise ConfigError(
            f"study storage '{path}' is not an Optuna journal: it ends with {_shown(tail)}, not a record "
            "(nor one a crash cut short), and a sweep rewrites only its own journal; name another file as "
            "'storage', or move this one aside"
        )
    kept, dropped = [], [tail] if tail else []  # bytes after the last newline: a write cut short
    for number, line in enumerate(lines, start=1):
        if _record(line) is not None:
            kept.append(line)
            continue
        if not line.strip():  # Optuna reads no empty line either; it holds nothing
            dropped.append(line)
            continue
        start = _whole_record_at_end(line)
        if start is None:
            raise ConfigError(
                f"study journal '{path}' line {number} is not a journal record ({line[:60]!r}) and not one cut "
                "short by a crash; restore the file from a copy, or move it aside to start the study anew"
            )
        kept.append(line[start:])
        dropped.append(line[:start])
    return b"".join(line + b"\n" for line in kept), dropped


def _record(line: bytes) -> Optional[dict]:
    """The line as an Optuna journal record (a JSON object with an ``op_code``), else None."""
    try:
        record = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8
        return None
    return record if isinstance(record, dict) and "op_code" in record else None


def _starts_as_record(part: bytes) -> bool:
    """Whether ``part`` begins as Optuna's records begin (or is a shorter beginning of one: a write cut early)."""
    return part[: len(RECORD_START)] == RECORD_START[: len(part)]


def _whole_record_at_end(line: bytes) -> Optional[int]:
    """Where a whole record starts that was written onto the end of a cut one (the longest such end), if any."""
    if not _starts_as_record(line):
        return None
    start = line.find(b"{", 1)
    while start != -1:
        if _record(line[start:]) is not None:
            return start
        start = line.find(b"{", start + 1)
    return None


def _shown(part: bytes) -> str:
    text = repr(part[:60].decode("utf-8", "replace"))
    return text + (f"... ({len(part)} bytes)" if len(part) > 60 else "")
