"""The sweep's pruning judge inside a trial's run: after each validation, rank 0 reports the monitored value
to the trial in the study's storage and asks the pruner; every rank gets rank 0's answer, so all stop after
the same validation (and the same step) on 1 or N ranks.

The sweep names the trial on the run's command line (``--trial N --trial-study NAME --trial-storage URL``,
``--trial-step-offset``, ``--trial-pruner``: ``TrialRef``), which the run checks as it starts (``pruning_judge``);
a run outside a sweep has no judge. A pruned run ends as an early stop does: its checkpoint, then its test.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, NamedTuple, Optional

from utils.distributed.ops import decided_by_rank0

log = logging.getLogger(__name__)

PRUNED_AT = "pruned_at_epoch"  # the trial's user attribute the parent reads after the run
Judge = Callable[[int, Dict[str, float], str], bool]


class TrialRef(NamedTuple):
    """The running trial of a sweep's study that a run reports its validations to."""

    storage: str  # the study's storage: a journal file's path or a database URL
    study: str
    number: int  # the trial's number in the study
    step_offset: int = 0  # the step its epoch 0 reports at: the run's seed's place among the trial's seeds
    pruner: str = "none"


def pruning_judge(trial: Optional[TrialRef]) -> Optional[Judge]:
    """``judge(epoch, metrics, monitor) -> prune?`` for a trial's run, None outside a sweep. The trial is checked
    now, on rank 0 (its storage opens, the study and the running trial exist): one ConfigError on every rank."""
    if trial is None:
        return None
    from utils.sweep.study import running_trial, trial_in

    trial_id = decided_by_rank0(lambda: running_trial(trial.storage, trial.study, trial.number))
    if trial.pruner == "none":
        return None  # a sweep that never prunes: the run reports nothing
    reported = None

    def judge(epoch: int, metrics: Dict[str, float], monitor: str) -> bool:
        def decide() -> bool:
            nonlocal reported
            if reported is None:
                reported = trial_in(trial.storage, trial.study, trial_id, trial.pruner)
            step = trial.step_offset + epoch
            reported.report(float(metrics[monitor]), step=step)
            pruned = reported.should_prune()
            if pruned:
                reported.set_user_attr(PRUNED_AT, step)
                log.info(
                    "pruned by the sweep after epoch %d (%s=%.4f): stopping as an early stop",
                    epoch,
                    monitor,
                    metrics[monitor],
                )
            return pruned

        return bool(decided_by_rank0(decide))

    return judge
