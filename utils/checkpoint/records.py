"""Validation records: what the validation after a checkpoint decided, in a small file beside it.

An epoch's checkpoint is written before its validation runs (nothing of the
epoch's training is lost when validation fails), so it cannot hold that
validation's outcome. The record ``<checkpoint>.val.json`` does: the epoch,
the metrics, the validator's state after it (best value, early-stopping
count) and the name of the best checkpoint file. It is written atomically
(temporary file, fsync, rename) before ``best.pt`` moves and before anything
is logged, so it is the point where a validation counts as done: a resume
from a checkpoint without its record runs that validation again; with it,
the validation is not repeated and ``best.pt`` follows the record.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Dict, Optional

from utils.checkpoint.files import fsync_dir

log = logging.getLogger(__name__)

SUFFIX = ".val.json"


def record_path(checkpoint: Path) -> Path:
    """The record of the numbered checkpoint ``checkpoint``."""
    return checkpoint.with_name(checkpoint.name + SUFFIX)


def write_record(checkpoint: Path, record: Dict[str, Any]) -> None:
    """Write ``checkpoint``'s record atomically (OSError on a full disk; the checkpoint itself is intact)."""
    path = record_path(checkpoint)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        json.dump(record, fh)  # NaN metrics stay NaN (Python's json reads them back)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_record(checkpoint: Path) -> Optional[Dict[str, Any]]:
    """``checkpoint``'s record, or None when it has none; an unreadable one counts as none (with a warning)."""
    path = record_path(checkpoint)
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as err:
        log.warning("validation record '%s' is unreadable (%s): the validation after that checkpoint runs again", path, err)
        return None
