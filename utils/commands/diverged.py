"""The one line a training run that diverged ends with (a NaN/inf loss or weights): the step, whether a checkpoint
of it is kept, that its folder stays marked failed (``utils/run/failed.py``), and the fixes that fit its settings."""

from __future__ import annotations

from typing import Optional

from utils.run.failed import FAILED
from utils.run.folder import RunFolder


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
