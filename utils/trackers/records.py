"""What a line of a spool (``trackers/<name>.jsonl``) must be to count as a record: the schema ``spool.py`` gives.

The spool is read back by a later process (a ``--resume``, ``python -m utils.trackers sync``) whose code indexes
the records (``record["step"]``, ``record["t"]``) and hands them to a tracker's client; a line that is no record of
this schema, whatever wrote it, is skipped (and counted) by the one check here, so the bookkeeping at opening
(``Spool._scan``) and what the sender sends (``Spool.pending``) see the same records. An ``artifact`` record is an
upload of a file, so it must name one inside the run folder: a line naming ``/etc/hostname`` is no record. The run
writes it relative to the run folder (``checkpoints/best.pt``), so a moved folder's records name its files where it
is now; one written as a whole path (by an earlier version) inside the folder the spool was made in is re-rooted
into the run folder, not dropped.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional

from utils.files.names import path_inside

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


def artifact_path(artifact: Any, run: Path, origin: Optional[str] = None) -> Optional[str]:
    """The whole path of an ``artifact`` record's file inside the run folder ``run``, None where it names none:
    relative to the run folder (or, where no file is there, to the current folder, as a run of an earlier version
    started there named it), or a whole path inside it or inside ``origin``, the folder the spool was made in
    (re-rooted: the folder was moved since)."""
    if not isinstance(artifact, str) or not artifact or "\0" in artifact:
        return None
    root = Path(run).resolve()  # written resolved: a linked run folder too
    if not os.path.isabs(artifact):
        in_run = str(root / artifact)
        artifact = in_run if os.path.isfile(in_run) or not os.path.isfile(artifact) else os.path.abspath(artifact)
    elif origin and not path_inside(root, artifact) and path_inside(Path(origin), artifact):
        artifact = str(root / os.path.relpath(os.path.abspath(artifact), os.path.abspath(origin)))
    return artifact if path_inside(root, artifact) else None


def checked_record(value: Any, run: Path, origin: Optional[str] = None) -> Optional[Record]:
    """``value`` (one line's JSON) when it is a record of the spool's schema, else None; ``run``: the run folder,
    the one place an ``artifact`` record may name a file in (a whole path inside ``origin``, the folder the spool
    was made in, is re-rooted there: the record comes back with the path of the file now)."""
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
        path = artifact_path(value["artifact"], run, origin)
        return {**value, "artifact": path} if path is not None else None
    else:
        good = False
    return value if good else None
