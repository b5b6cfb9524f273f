"""Which run a bare ``--resume`` (or ``train.auto_resume``) continues: the experiment's newest run that did not
finish. A training run finishes by testing its best checkpoint, the last thing it does: its ``metrics.jsonl``
holds a ``test`` row. A run killed before (or while writing) that row did not finish; a finished run goes on
(with more ``train.epochs``, say) only when named: ``--resume RUN_FOLDER``, and so does a run marked failed
(``utils/run/failed.py``: it diverged)."""

from __future__ import annotations

from pathlib import Path
from typing import List, NamedTuple, Optional

from utils.errors import CheckpointError, name_list
from utils.run import metrics_file
from utils.run.failed import failure
from utils.run.folder import RunFolder, runs_with_checkpoints


def finished(run: RunFolder) -> bool:
    """Whether a training run ended: it tested its best checkpoint (its test row in metrics.jsonl)."""
    return any(row.get("split") == "test" for row in metrics_file.read_lenient(run.metrics))


class Continued(NamedTuple):
    """The run a bare ``--resume`` continues, and why it chose it (for the start line)."""

    run: RunFolder
    why: str


def unfinished_run(experiment: Path, required: bool) -> Optional[Continued]:
    """``--resume`` alone (``required``) or ``train.auto_resume``: the newest run with a checkpoint that did not
    finish, with why it chose it (for the start line). Without one, ``--resume`` is a CheckpointError naming the
    newest finished run; auto-resume continues that run (a job started again after it ended trains no more,
    as before) or, without any run, starts a fresh one (None)."""
    runs = runs_with_checkpoints(experiment)
    if not runs and required:
        raise CheckpointError(f"--resume: no checkpoint in '{experiment}'; train without --resume first")
    done: List[RunFolder] = []  # newest first
    failed = [run for run in runs if failure(run) is not None]  # continued only when named
    for run in runs:
        if run in failed:
            continue
        if run.path == experiment or not finished(run):  # a folder of framework 0.2 resumes as it did
            named = f"; {name_list([r.path.name for r in done], show=3)} finished, {_when_named(done)}" if done else ""
            return Continued(run, f" (continued: the newest run that did not finish{named})")
        done.append(run)
    if required and failed and not done:
        raise CheckpointError(
            f"--resume: the newest run of '{experiment}' with a checkpoint, {failed[0].path.name}, failed "
            f"({failure(failed[0]).split('; ')[0]}); a failed run is {_when_named(failed)} (e.g. with a lower optim.lr), or start a "
            "new run without --resume"
        )
    if required:
        raise CheckpointError(
            f"--resume: every run of '{experiment}' finished (the newest, {done[0].path.name}, tested its best "
            f"checkpoint); a finished run is {_when_named(done)} (e.g. with more train.epochs), or start a new run without --resume"
        )
    if done:  # auto-resume of a job that ended: its run again (it trains further only with more train.epochs)
        return Continued(done[0], " (continued: train.auto_resume, every run finished, the newest)")
    return None


def _when_named(done: List[RunFolder]) -> str:
    return f"continued only when named: --resume {done[0].path}"
