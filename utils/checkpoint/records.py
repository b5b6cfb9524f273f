"""Validation records: what the validation after a checkpoint decided, in a small file beside it.

An epoch's checkpoint is written before its validation runs (nothing of the
epoch's training is lost when validation fails), so it cannot hold that
validation's outcome. The record ``<checkpoint>.val.json`` does: a
:class:`ValidationRecord`, whose validator's state names the best checkpoint
file after it (the one place the best is kept on disk; a checkpoint holds the
validator's state before its validation). It is written atomically (temporary file, fsync,
rename) before ``best.pt`` moves and before anything is logged, so it is the
point where a validation counts as done: a resume from a checkpoint without its
record runs that validation again; with it, the validation is not repeated and
``best.pt`` follows the record. ``write_record`` is its one writer (called by
the checkpointer) and ``read_record`` its one reader; ``validator_as_of`` reads
the validator's state a checkpoint continues with.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional

from utils.checkpoint.files import fsync_dir
from utils.errors import CheckpointError
from utils.files.names import plain_name
from utils.files.owned import write_text

log = logging.getLogger(__name__)

SUFFIX = ".val.json"


@dataclass
class ValidationRecord:
    """One validation's outcome (``Validator.run_pending``), as recorded beside the checkpoint it validated.

    ``epoch`` is the epoch validated (the checkpoint's ``Progress.trained_epoch``), not the epoch
    training continues from."""

    epoch: int
    step: int  # the optimizer steps taken when it ran (the metrics.jsonl row's step)
    metrics: Dict[str, float]
    validator: Dict[str, Any]  # the validator's state after it: best value, epoch and file, early-stopping count

    def to_dict(self) -> Dict[str, Any]:
        """The JSON form (the file's keys, in this order)."""
        return {
            "epoch": self.epoch,
            "step": self.step,
            "metrics": self.metrics,
            "validator": self.validator,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ValidationRecord":
        validator = with_best_file(data["validator"], data)
        return cls(int(data["epoch"]), int(data["step"]), dict(data["metrics"]), validator)


def record_path(checkpoint: Path) -> Path:
    """The record of the numbered checkpoint ``checkpoint``."""
    return checkpoint.with_name(checkpoint.name + SUFFIX)


def write_record(checkpoint: Path, record: ValidationRecord) -> None:
    """Write ``checkpoint``'s record atomically (OSError on a full disk; the checkpoint itself is intact)."""
    path = record_path(checkpoint)
    # NaN metrics stay NaN (Python's json reads them back); never through a link (utils/files/owned.py)
    write_text(path.parent, path, json.dumps(record.to_dict()), "resume with --resume", sync=True)
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


def with_best_file(validator: Mapping[str, Any], older: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The validator's state ``validator``, whose ``file`` names the best checkpoint file. Files written before
    it did kept that name as ``older``'s ``best`` (a record's own key; a checkpoint's ``loop.checkpointer``
    state): this is the one place that reads it there."""
    state = dict(validator)
    if "file" not in state and older is not None and "best" in older:
        state["file"] = older["best"]
    return state


def validator_as_of(
    checkpoint: Path, record: Optional[ValidationRecord], saved: Callable[[str], Optional[Mapping[str, Any]]]
) -> Dict[str, Any]:
    """The validator's state a resume from ``checkpoint`` continues with: the record's (after the validation that
    followed it), else (that validation did not finish) the checkpoint's own; ``saved(name)``: the checkpoint's
    loop state ``name`` (``Checkpoint.loop_state``). A best file that is not a file of the checkpoint's own
    folder (a path, ``..``) is refused: the resume links and rotates the file it names."""
    state = with_best_file(record.validator if record is not None else saved("validator") or {}, saved("checkpointer"))
    best = state.get("file")
    if best is not None and not plain_name(best):
        raise CheckpointError(
            f"checkpoint '{checkpoint}' (or its {SUFFIX} record) names its best checkpoint {best!r}, not a file of "
            "its own folder; the file was altered or made elsewhere: resume from another checkpoint of the run"
        )
    return state
