"""The sums behind ``train/loss`` are training state: a checkpoint between two log steps keeps them, so the first
value logged after a resume is the uninterrupted run's (the process test: ``tests/checkpoint/test_resume_exact.py``);
an older checkpoint without them, or a resume on another world size, says so in one line."""

from __future__ import annotations

import logging

import torch

from utils.amp.outcome import StepOutcome, StepResult
from utils.engine.accounting import StepAccounting
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.stop import StopSignal

LOSSES = [2.0, 1.0, 4.0, 3.0, 0.5, 1.5, 2.5, 3.5]


def accounting(world_size: int = 1) -> StepAccounting:
    return StepAccounting(NonFinitePolicy(), StopSignal(world_size), log_every=len(LOSSES))


def steps(acc: StepAccounting, first: int, last: int) -> None:
    """Steps ``first`` .. ``last`` (1-based) of LOSSES, 8 samples each, closed and synced as the loop does."""
    for step in range(first, last + 1):
        acc.record_micro_batch(torch.tensor(LOSSES[step - 1]), 8)
        acc.end_step(0, step - 1, StepOutcome(StepResult.TAKEN))
        acc.sync_if_due(step)


def test_a_resume_between_log_steps_logs_the_uninterrupted_mean():
    whole = accounting()
    steps(whole, 1, 8)
    cut = accounting()
    steps(cut, 1, 3)
    cut.sync(3)  # a checkpoint syncs first
    resumed = accounting()
    resumed.load_state_dict(cut.state_dict())
    resumed.start_epoch(0)
    steps(resumed, 4, 8)
    assert resumed.read_loss(8) == whole.read_loss(8) == sum(LOSSES) / len(LOSSES)


def test_an_older_checkpoint_or_another_world_size_is_said(caplog):
    cut = accounting(world_size=2)
    steps(cut, 1, 3)
    cut.sync(3)
    state = cut.state_dict()
    with caplog.at_level(logging.INFO):
        accounting(world_size=3).load_state_dict(state)
        accounting().load_state_dict({"epoch_meter": state["epoch_meter"]})  # as framework 0.3.0 wrote it
    assert "world size 2 -> 3: train/loss and the epoch's train loss are means over rank 0's share" in caplog.text
    assert "the checkpoint holds no log window (an older framework wrote it)" in caplog.text
