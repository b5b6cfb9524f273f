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
from typing import Optional

from utils.errors import NonFiniteError, UserError
from utils.files.owned import open_file, remove, write_text
from utils.run.folder import RunFolder
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


def newest_checkpoint(run: RunFolder) -> Optional[str]:
    """The name of the run's newest numbered checkpoint (the one ``--resume`` continues from), if any."""
    from utils.checkpoint.stores import open_checkpoint_store

    numbered = open_checkpoint_store(run.checkpoints).numbered() if run.checkpoints.is_dir() else []
    return numbered[0].name if numbered else None


def diverged(what: str, run: RunFolder, lr: float, clip_grad_norm: Optional[float], opt_level: str) -> str:
    """The one line of a run that diverged: ``what`` (the step), whether a checkpoint of it is kept, that the folder
    stays, and the fixes that fit its settings (no clipping advice where it clips, no amp advice at O0)."""
    newest = newest_checkpoint(run)
    kept = (
        f"its checkpoints are kept (the newest, {newest}: --resume {run.path} continues from it)"
        if newest
        else "no checkpoint of it was written"
    )
    fixes = [f"lower optim.lr (now {lr:g})"]
    if clip_grad_norm is None:
        fixes.append("enable train.clip_grad_norm (e.g. 1.0)")
    if opt_level != "O0":
        fixes.append(f"use amp.opt_level=O0 (now {opt_level})")
    advice = fixes[0] if len(fixes) == 1 else ", ".join(fixes[:-1]) + " or " + fixes[-1]
    return f"{what}; {kept}; the run folder {run.path} and its log.txt stay, marked failed ({FAILED}); {advice}"
