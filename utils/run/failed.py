"""A training run that failed after it began keeps its folder, marked failed: a run that diverged (a NaN/inf loss
or weights, ``NonFiniteError``) is the user's story of what happened, its log.txt and checkpoints included.

A start that bad input stopped takes its folder back (``RunFolder.abandon``), which also took the folder of a run
that had trained for a while and then diverged, log.txt with it, though the first log line named it. ``FAILED``
(``failed.txt``, the error line) marks the folder instead: a bare ``--resume`` and ``train.auto_resume`` pass it
over (``utils/run/unfinished.py``), and ``--resume RUN_FOLDER`` still continues it from its last checkpoint.
"""

from __future__ import annotations

import datetime
import logging
from pathlib import Path
from typing import Optional

from utils.errors import CheckpointError, NonFiniteError, UserError
from utils.files.owned import open_file, remove, write_text
from utils.run.folder import CHECKPOINTS, RunFolder, numbered, run_holding
from utils.undecodable import ERRORS

log = logging.getLogger(__name__)

FAILED = "failed.txt"


def keeps_folder(err: UserError) -> bool:
    """Whether the run that ``err`` stopped trained before it failed, so its folder is kept (marked failed)."""
    return isinstance(err, NonFiniteError)


def mark_failed(run: RunFolder, line: str) -> None:
    """Write ``line`` (the error line the console shows) at the end of the run's log.txt, whose handler is closed
    by now, and into its ``FAILED`` marker; a folder that refuses is a warning (the error is what to report)."""
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]  # as log.txt's other lines
    try:
        with open_file(run.path, run.log, "a", encoding="utf-8", errors=ERRORS) as fh:
            fh.write(f"{stamp} ERROR {line}\n")
        write_text(run.path, run.path / FAILED, line + "\n", "the error line above says what happened")
    except (OSError, UserError) as err:
        log.warning("could not mark the run folder '%s' failed (%s)", run.path, getattr(err, "strerror", None) or err)


def clear_failed(run: RunFolder) -> None:
    """A run continued by name (``--resume RUN_FOLDER``) is no longer failed: a bare ``--resume`` may pick it again."""
    try:
        remove(run.path, run.path / FAILED)
    except (OSError, UserError) as err:
        log.warning("could not clear the failed mark of '%s' (%s)", run.path, getattr(err, "strerror", None) or err)


def failure(run: RunFolder) -> Optional[str]:
    """The error line of a run marked failed, else None."""
    try:
        return (run.path / FAILED).read_text(errors="replace").strip() or "failed"
    except FileNotFoundError:
        return None
    except OSError:  # unreadable: it is there
        return "failed"


def check_not_failed(checkpoint: str) -> None:
    """CheckpointError for a ``--checkpoint`` that is missing because its run failed: ``latest`` points to a run
    that diverged before its first checkpoint, and ``.../latest/checkpoints/best.pt`` said only "does not exist".
    The line names the failure and the newest ``best.pt`` of a run that did not fail."""
    path = Path(checkpoint).expanduser()
    folder = run_holding(path) if not path.exists() else None
    why = failure(RunFolder(folder)) if folder is not None else None
    if folder is None or why is None:
        return  # present, or missing for another reason: the reader's own line
    others = [run.path / CHECKPOINTS / "best.pt" for run in reversed(numbered(folder.parent)) if failure(run) is None]
    found = [str(best) for best in others if best.is_file()]
    instead = f"; the newest best checkpoint of a run that did not fail: {found[0]}" if found else ""
    raise CheckpointError(
        f"checkpoint '{checkpoint}' does not exist: its run {folder.name} failed ({why.split('; ')[0]}; failed.txt "
        f"in it){instead}"
    )
