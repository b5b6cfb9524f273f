"""What a line of a spool (``trackers/<name>.jsonl``) must be to count as a record: the schema ``spool.py`` gives.

The spool is read back by a later process (a ``--resume``, ``python -m utils.trackers sync``) whose code indexes
the records (``record["step"]``, ``record["t"]``) and hands them to a tracker's client; a line that is no record of
this schema, whatever wrote it, is skipped (and counted) by the one check here, so the bookkeeping at opening
(``Spool._scan``) and what the sender sends (``Spool.pending``) see the same records. An ``artifact`` record is an
upload of a file, so it must name one inside the run folder: a line naming ``/etc/hostname`` is no record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

from utils.names_from_files import path_inside

Record = Dict[str, Any]
STATUSES = ("RUNNING", "FINISHED", "FAILED")


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """An int or a float (NaN and infinities too: a diverged loss is a value to log); a bool is none."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_scalar(value: Any) -> bool:
    """What a param or a tag holds: a string, a number, a bool or null (a sweep's seed may be null)."""
    return value is None or isinstance(value, (str, int, float, bool))


def string_keyed(value: Any, check: Any) -> bool:
    """Whether ``value`` is a dict of string keys whose values all pass ``check``."""
    return isinstance(value, dict) and all(isinstance(key, str) and check(item) for key, item in value.items())


def checked_record(value: Any, run: Path) -> Optional[Record]:
    """``value`` (one line's JSON) when it is a record of the spool's schema, else None; ``run``: the run folder,
    the one place an ``artifact`` record may name a file in."""
    if not isinstance(value, dict) or not is_int(value.get("t")):
        return None
    keys = set(value) - {"t"}
    if keys == {"step", "metrics"}:
        good = is_int(value["step"]) and value["step"] >= 0 and string_keyed(value["metrics"], is_number)
    elif keys in ({"params"}, {"tags"}):
        good = string_keyed(value[keys.pop()], is_scalar)
    elif keys == {"status"}:
        good = value["status"] in STATUSES
    elif keys == {"artifact"}:
        good = path_inside(Path(run).resolve(), value["artifact"])  # written resolved: a linked run folder too
    else:
        good = False
    return value if good else None
