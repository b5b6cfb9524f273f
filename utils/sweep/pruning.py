"""The sweep's pruning judge inside a trial's run: after each validation, rank 0 reports the monitored value
to the trial in the study's storage and asks the pruner; every rank gets rank 0's answer, so all stop after
the same validation (and the same step) on 1 or N ranks.

The sweep passes the trial through the environment (``REGTRAIN_SWEEP_*``, set by ``trial_runs.py``); a run
outside a sweep has no judge. A pruned run ends as an early stop does: its checkpoint, then its test.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Dict, Mapping, Optional

from utils.distributed.ops import decided_by_rank0

log = logging.getLogger(__name__)

STORAGE, STUDY, TRIAL, STEP_OFFSET, PRUNER = (
    "REGTRAIN_SWEEP_STORAGE",
    "REGTRAIN_SWEEP_STUDY",
    "REGTRAIN_SWEEP_TRIAL",
    "REGTRAIN_SWEEP_STEP_OFFSET",
    "REGTRAIN_SWEEP_PRUNER",
)
PRUNED_AT = "pruned_at_epoch"  # the trial's user attribute the parent reads after the run


def pruning_judge(environ: Mapping[str, str] = os.environ) -> Optional[Callable[[int, Dict[str, float], str], bool]]:
    """``judge(epoch, metrics, monitor) -> prune?`` for a trial's run, None outside a sweep."""
    if TRIAL not in environ or environ.get(PRUNER, "none") == "none":
        return None  # no sweep, or one that never prunes: the run neither loads Optuna nor reports
    storage, study_name, trial_id = environ[STORAGE], environ[STUDY], int(environ[TRIAL])
    offset = int(environ.get(STEP_OFFSET, "0"))
    trial = None

    def judge(epoch: int, metrics: Dict[str, float], monitor: str) -> bool:
        def decide() -> bool:
            nonlocal trial
            if trial is None:
                from utils.sweep.study import trial_in

                trial = trial_in(storage, study_name, trial_id, environ.get(PRUNER, "none"))
            trial.report(float(metrics[monitor]), step=offset + epoch)
            pruned = trial.should_prune()
            if pruned:
                trial.set_user_attr(PRUNED_AT, offset + epoch)
                log.info(
                    "pruned by the sweep after epoch %d (%s=%.4f): stopping as an early stop",
                    epoch,
                    monitor,
                    metrics[monitor],
                )
            return pruned

        return bool(decided_by_rank0(decide))

    return judge
