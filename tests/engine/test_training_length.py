"""A run resumed with a longer train.iterations continues from where it really stopped: no batch skipped
or read twice, the full new length, and the schedule of the new length from the resumed step on."""

from __future__ import annotations

from pathlib import Path
from typing import List

import pytest
import torch

from tests.conftest import fast_overrides
from tests.fixtures.dist_utils import PYTHON, run
from utils.amp import Amp
from utils.checkpoint.state import Checkpoint, Progress, RunRecord, StateObjects, snapshot_training_state
from utils.config.schema import AmpConfig, ScheduleConfig
from utils.optim.schedules import build_scheduler, lr_factor_fn

# data.prefetch=none: no batch is read ahead, so what is read is what training consumed
RECORDED = [
    "custom_imports=[tests.fixtures.recorded_digits]",
    "data.name=recorded_digits",
    "data.prefetch=none",
    "threads=1",
    "schedule.warmup_epochs=0",
]


def train(out: Path, name: str, record: Path, *extra: str) -> None:
    cmd = [PYTHON, "main.py", *fast_overrides(out, name, epochs=1), *RECORDED, *extra]
    proc = run(cmd, 300, {"REGTRAIN_RECORD": str(record)})  # forked from the worker's main.py server
    assert proc.returncode == 0, proc.stderr[-3000:]


def reads(record: Path) -> List[int]:
    return [int(line) for line in Path(f"{record}.rank0").read_text().split()]


@pytest.mark.slow
def test_a_5_step_run_resumed_to_30_steps_reads_every_batch_once_and_takes_30_steps(tmp_path):
    train(tmp_path, "short", tmp_path / "short", "train.iterations=5")
    last = torch.load(tmp_path / "short" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert last["progress"] == {"epoch": 0, "batch": 5, "step": 5}  # where it stopped: 5 of epoch 0's 19 batches
    # a run that used up its steps finished: continued when named
    train(tmp_path, "short", tmp_path / "short", "train.iterations=30", "--resume", str(tmp_path / "short" / "run_001"))
    train(tmp_path, "long", tmp_path / "long", "train.iterations=30")
    resumed, uninterrupted = reads(tmp_path / "short"), reads(tmp_path / "long")
    assert len(resumed) == 30 * 64 and resumed == uninterrupted  # the same batches, in the same order
    epoch0 = resumed[: 19 * 64]
    assert len(set(epoch0)) == len(epoch0)  # every batch of epoch 0 once
    last = torch.load(tmp_path / "short" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert last["progress"] == {"epoch": 1, "batch": 11, "step": 30}


def test_a_resume_with_a_longer_run_steps_on_the_new_schedule_from_the_resumed_step():
    cfg = ScheduleConfig(name="cosine", warmup_epochs=0)
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = build_scheduler(optimizer, cfg, iters_per_epoch=10, total_iters=5)
    for _ in range(5):
        optimizer.step()
        scheduler.step()
    saved = snapshot_training_state(
        StateObjects(model, optimizer, scheduler, Amp(AmpConfig(), torch.device("cpu"))), Progress(0, 5, 5), RunRecord()
    )
    assert optimizer.param_groups[0]["lr"] == 0.0  # the 5-step cosine ended

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    longer = build_scheduler(optimizer, cfg, iters_per_epoch=10, total_iters=30)
    Checkpoint(saved).restore(StateObjects(model, optimizer, longer, Amp(AmpConfig(), torch.device("cpu"))), rank=0)
    assert longer.last_epoch == 5
    assert optimizer.param_groups[0]["lr"] == 0.1 * lr_factor_fn(cfg, 10, 30)(5)  # step 6 uses the 30-step schedule

    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    same = build_scheduler(optimizer, cfg, iters_per_epoch=10, total_iters=5)
    Checkpoint(saved).restore(StateObjects(model, optimizer, same, Amp(AmpConfig(), torch.device("cpu"))), rank=0)
    # the same length: the same LR
    assert optimizer.param_groups[0]["lr"] == saved["optimizer"]["param_groups"][0]["lr"]


def test_a_forced_resume_over_other_data_schedules_the_epoch_it_restarts_from_its_first_batch():
    """--resume-force over another data order restarts the interrupted epoch at batch 0: the schedule counts
    that epoch's steps again (it counted them as done, and ended 5 steps early)."""
    from types import SimpleNamespace

    from utils.checkpoint.start_point import Chosen, start_point
    from utils.config.schema import TrainConfig
    from utils.engine.training_length import training_length

    saved = SimpleNamespace(progress=Progress(epoch=1, batch=5, step=15), loop_state=lambda name: None)
    chosen = Chosen(Path("c.pt"), None, saved)
    same, forced = start_point(chosen, lambda checkpoint: True), start_point(chosen, lambda checkpoint: False)
    assert same.progress == Progress(1, 5, 15) and forced.progress == Progress(1, 0, 15)
    train = TrainConfig(epochs=3)
    assert training_length(train, 10, same.progress) == (3, 15 + 2 * 10 - 5)
    assert training_length(train, 10, forced.progress) == (3, 15 + 2 * 10)
