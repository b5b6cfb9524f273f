"""Validation records: what the validation after a checkpoint decided, in a small file beside it.

An epoch's checkpoint is written before its validation runs (nothing of the
epoch's training is lost when validation fails), so it cannot hold that
validation's outcome. The record ``<checkpoint>.val.json`` does: a
:class:`ValidationRecord`. It is written atomically (temporary file, fsync,
rename) before ``best.pt`` moves and before anything is logged, so it is the
point where a validation counts as done: a resume from a checkpoint without its
record runs that validation again; with it, the validation is not repeated and
``best.pt`` follows the record. ``write_record`` is its one writer (called by
the checkpointer) and ``read_record`` its one reader.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

from utils.checkpoint.files import fsync_dir
from utils.errors import CheckpointError
from utils.names_from_files import plain_name

log = logging.getLogger(__name__)

SUFFIX = ".val.json"


@dataclass
class ValidationRecord:
    """One validation's outcome as recorded beside the checkpoint it validated.

    ``epoch`` is the epoch validated (the checkpoint's ``Progress.trained_epoch``), not the epoch
    training continues from."""

    epoch: int
    step: int  # the optimizer steps taken when it ran (the metrics.jsonl row's step)
    metrics: Dict[str, float]
    validator: Dict[str, Any]  # the validator's state after it: best value and epoch, early-stopping count
    best: Optional[str] = None  # the name of the best checkpoint file after it

    def to_dict(self) -> Dict[str, Any]:
        """The JSON form (the file's keys, in this order)."""
        return {
            "epoch": self.epoch,
            "step": self.step,
            "metrics": self.metrics,
            "validator": self.validator,
            "best": self.best,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ValidationRecord":
        return cls(
            int(data["epoch"]), int(data["step"]), dict(data["metrics"]), dict(data["validator"]), data.get("best")
        )


def record_path(checkpoint: Path) -> Path:
    """The record of the numbered checkpoint ``checkpoint``."""
    return checkpoint.with_name(checkpoint.name + SUFFIX)


def write_record(checkpoint: Path, record: ValidationRecord) -> None:
    """Write ``checkpoint``'s record atomically (OSError on a full disk; the checkpoint itself is intact)."""
    path = record_path(checkpoint)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        json.dump(record.to_dict(), fh)  # NaN metrics stay NaN (Python's json reads them back)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_record(checkpoint: Path) -> Optional[ValidationRecord]:
    """``checkpoint``'s record, or None when it has none; an unreadable one counts as none (with a warning)."""
    path = record_path(checkpoint)
    if not path.is_file():
        return None
    try:
        return ValidationRecord.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning(
            "validation record '%s' is unreadable (%s): the validation after that checkpoint runs again", path, err
        )
        return None


def best_as_of(
    checkpoint: Path, record: Optional[ValidationRecord], saved: Optional[Mapping[str, Any]]
) -> Optional[str]:
    """The best checkpoint file as of ``checkpoint``: the one the record of the validation after it names; else
    (that validation did not finish, or an older version wrote a record without it) the one the checkpoint's
    own ``loop.checkpointer`` state ``saved`` names (the best before it). A name that is not a file of the
    checkpoint's own folder (a path, ``..``) is refused: the resume links and rotates the file it names."""
    best = (record.best if record is not None else None) or (saved or {}).get("best")
    if best is not None and not plain_name(best):
        raise CheckpointError(
            f"checkpoint '{checkpoint}' (or its {SUFFIX} record) names its best checkpoint {best!r}, not a file of "
            "its own folder; the file was altered or made elsewhere: resume from another checkpoint of the run"
        )
    return best
