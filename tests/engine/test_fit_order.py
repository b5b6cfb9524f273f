"""The order ``Trainer.fit`` calls its services in, with spy services (a tiny model, milliseconds per test)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, List, Optional, Tuple

import pytest
import torch
from torch import nn

from utils.amp import Amp
from utils.checkpoint.records import ValidationRecord
from utils.checkpoint.start_point import StartPoint
from utils.checkpoint.state import Progress
from utils.config.schema import AmpConfig
from utils.distributed.preempt import Preempted
from utils.engine.best_tracker import BestTracker
from utils.engine.checkpointer import NoCheckpointer
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts, Services
from utils.engine.validator import NoValidator

Events = List[Tuple[Any, ...]]


class Built:
    """Settings whose ``build`` hands the trainer a ready spy."""

    def __init__(self, spy: Any) -> None:
        self.spy = spy

    def build(self, collaborators: Any) -> Any:
        return self.spy


class SpyCheckpointer(NoCheckpointer):
    def __init__(self, events: Events, every_steps: int = 0) -> None:
        self.events, self.every_steps = events, every_steps

    def prepare(self) -> None:
        self.events.append(("prepare",))

    def is_periodic(self, step: int, batch: int, num_batches: int) -> bool:
        return self.every_steps > 0 and step % self.every_steps == 0 and batch < num_batches

    def save(self, progress: Progress, final: bool = False, named: Optional[Progress] = None) -> None:
        self.events.append(("save", progress, final))
        self.last_path = Path(f"epoch{progress.epoch}_batch{progress.batch}.pt")

    def commit_validation(self, validation: ValidationRecord) -> None:
        self.events.append(("commit", validation.epoch))

    def resumed_from(self, path: Path, best: Optional[str]) -> None:
        self.events.append(("resumed_from", path, best))

    def finish(self) -> None:
        self.events.append(("finish",))


class SpyValidator(NoValidator):
    """Due every epoch; scores ``values`` one after the other (``min`` mode)."""

    def __init__(self, events: Events, values: List[float], patience: Optional[int] = None) -> None:
        self.events, self.values = events, list(values)
        self.tracker = BestTracker("loss", "min", patience)
        self.pending: Optional[int] = None

    def epoch_trained(self, epoch: int, last: bool) -> None:
        self.pending = epoch

    def load_state_dict(self, state: dict) -> None:
        self.tracker.load_state_dict(state)
        self.pending = state.get("pending")

    def run_pending(self, step: int, checkpoint: Optional[Path] = None) -> ValidationRecord:
        epoch, self.pending = self.pending, None
        self.events.append(("validate", epoch))
        value = self.values.pop(0)
        self.tracker.update(value, epoch, checkpoint.name if checkpoint is not None else None)
        return ValidationRecord(epoch, step, {"loss": value}, self.tracker.state_dict())


class Recorder:
    """A hook that records the events it sees, with the epoch ``trainer.state`` shows."""

    def __init__(self, events: Events, signal_at_step: Optional[int] = None) -> None:
        self.events, self.signal_at_step = events, signal_at_step

    def before_train(self, trainer: Any) -> None:
        self.events.append(("before_train",))

    def before_epoch(self, trainer: Any) -> None:
        self.events.append(("before_epoch", trainer.state.epoch))

    def after_step(self, trainer: Any) -> None:
        if trainer.state.step == self.signal_at_step:
            trainer.stop.flag.signum = signal.SIGTERM  # what the SIGTERM handler records

    def after_epoch(self, trainer: Any) -> None:
        self.events.append(("after_epoch", trainer.state.epoch))

    def after_validation(self, trainer: Any, metrics: Any) -> None:
        self.events.append(("after_validation", trainer.state.epoch))

    def after_train(self, trainer: Any) -> None:
        self.events.append(("after_train",))


def trainer(
    events: Events, epochs: int = 2, values=(3.0, 2.0, 1.0, 0.5), patience=None, every_steps=0, signal_at_step=None
) -> Trainer:
    torch.manual_seed(0)
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    batches = [(torch.randn(2, 2), torch.tensor([0, 1])) for _ in range(4)]
    parts = Parts(model, nn.CrossEntropyLoss(), Amp(AmpConfig(), torch.device("cpu")), optimizer, scheduler, batches)
    services = Services(
        checkpoints=Built(SpyCheckpointer(events, every_steps)),
        validation=Built(SpyValidator(events, list(values), patience)),
    )
    return Trainer(parts, LoopOptions(epochs=epochs, log_every=1), services, hooks=[Recorder(events, signal_at_step)])


def fit(run: Trainer) -> Any:
    try:
        return run.fit()
    finally:
        run.close()  # the signal handlers fit installed


def epoch(e: int) -> List[Tuple[Any, ...]]:
    """One epoch of 4 steps: trained, checkpointed, then validated."""
    return [
        ("before_epoch", e),
        ("after_epoch", e),
        ("save", Progress(e + 1, 0, 4 * (e + 1)), False),
        ("validate", e),
        ("commit", e),
        ("after_validation", e),
    ]


def test_each_epoch_is_checkpointed_before_it_is_validated():
    events: Events = []
    run = trainer(events)
    result = fit(run)
    assert events == [("prepare",), ("before_train",), *epoch(0), *epoch(1), ("finish",), ("after_train",)]
    assert (result.best_epoch, result.best_value, result.monitor) == (1, 2.0, "")
    assert run.state.epoch == 2 and run.state.batches_done == run.state.batch == 0


class SavedAt:
    """A checkpoint's stand-in for ``start_from``: its position; its state is restored by no object here."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress

    def restore(self, objects: Any, rank: int, world_size: int, reset_optimizer: bool = False) -> None:
        pass  # start_from's StartPoint.load_state


def resumed_at(progress: Progress, record: Optional[ValidationRecord]) -> StartPoint:
    validator = record.validator if record is not None else {}
    return StartPoint(Path("epoch2_batch0.pt"), SavedAt(progress), record, progress, validator)


def test_a_resume_finishes_the_pending_validation_first_showing_the_epoch_it_validates():
    events: Events = []
    run = trainer(events, epochs=3)
    # as restored from epoch 1's checkpoint, written before its validation finished
    run.validator.epoch_trained(1, last=False)
    run.start_from(resumed_at(Progress(2, 0, 8), record=None))
    fit(run)
    assert events[:6] == [
        ("resumed_from", Path("epoch2_batch0.pt"), None),
        ("prepare",),
        ("before_train",),
        ("validate", 1),
        ("commit", 1),
        ("after_validation", 1),
    ]
    assert events[6:-2] == epoch(2) and run.state.epoch == 3


def test_a_stop_signal_raises_preempted_after_the_checkpoint_of_the_step_it_ended():
    events: Events = []
    with pytest.raises(Preempted, match="epoch1_batch2.pt"):
        fit(trainer(events, signal_at_step=5))  # seen at step 6's sync point: the run ends after it, no validation
    assert events[-2:] == [("before_epoch", 1), ("save", Progress(1, 2, 6), True)]


def test_periodic_checkpoints_come_inside_epochs_only():
    events: Events = []
    fit(trainer(events, every_steps=3))
    saves = [e[1] for e in events if e[0] == "save"]
    # step 4 ends epoch 0: no periodic
    assert saves == [
        Progress(0, 3, 3),
        Progress(1, 0, 4),
        Progress(1, 2, 6),
        Progress(2, 0, 8),
    ]


def test_early_stopping_ends_training_after_the_validation_that_used_up_the_patience():
    events: Events = []
    run = trainer(events, epochs=5, values=(1.0, 2.0, 3.0), patience=1)
    fit(run)
    assert [e for e in events if e[0] == "validate"] == [("validate", 0), ("validate", 1)]
    assert run.state.stop and events[-2:] == [("finish",), ("after_train",)]


def test_a_resume_whose_validation_was_recorded_continues_after_it():
    events: Events = []
    run = trainer(events)
    state = {"metric": "loss", "mode": "min", "value": 2.0, "epoch": 1, "file": "epoch1_batch0.pt", "pending": None}
    record = ValidationRecord(1, 8, {"loss": 2.0}, {**state, "evals_since_best": 0})
    run.start_from(resumed_at(Progress(2, 0, 8), record))
    assert run.state.progress == Progress(2, 0, 8) and run.validator.tracker.value == 2.0
    assert run.validator.tracker.file == "epoch1_batch0.pt"
    result = fit(run)  # both epochs trained, their validations done: nothing is left to do
    assert events == [
        ("resumed_from", Path("epoch2_batch0.pt"), "epoch1_batch0.pt"),
        ("prepare",),
        ("before_train",),
        ("finish",),
        ("after_train",),
    ]
    assert (result.best_epoch, result.best_value) == (1, 2.0)
