"""Each built-in service alone, without a Trainer: the checkpointer, the validator, the resume, the validation record."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest
import torch
from torch import nn

from utils.amp import Amp
from utils.checkpoint.records import ValidationRecord, read_record, record_path, validator_as_of, write_record
from utils.checkpoint.start_point import Best, Chosen, start_point
from utils.checkpoint.state import Checkpoint, Progress, RunRecord, StateObjects, snapshot_training_state
from utils.checkpoint.store import CheckpointStore
from utils.config.schema import AmpConfig
from utils.distributed.process_group import DistInfo
from utils.engine.checkpointer import Checkpointer, Contents
from utils.engine.validator import Scoring, Validator
from utils.errors import NonFiniteError


class Named:
    """A stateful loop object (the validator's place in a checkpoint)."""

    def __init__(self, state: Dict[str, Any]) -> None:
        self.state = state

    def state_dict(self) -> Dict[str, Any]:
        return dict(self.state)

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.state = dict(state)


def objects(seed: int = 0, best: Any = None) -> StateObjects:
    torch.manual_seed(seed)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    loop = {"validator": Named({"pending": 0, "file": best})}
    return StateObjects(model, optimizer, scheduler, Amp(AmpConfig(), torch.device("cpu")), loop=loop)


def checkpointer(tmp_path: Path, state: StateObjects, synced: List[int], background: bool = False) -> Checkpointer:
    contents = Contents(lambda: state, RunRecord({"seed": 0}), DistInfo(), lambda: synced.append(1))
    return Checkpointer(CheckpointStore(tmp_path), contents, every_steps=4, background=background)


def validation(epoch: int, best: str) -> ValidationRecord:
    """Epoch ``epoch``'s validation, after which ``best`` is the best file."""
    return ValidationRecord(
        epoch, 10 * (epoch + 1), {"top1": 0.5 + epoch}, {"metric": "top1", "value": 0.5, "file": best, "pending": None}
    )


@pytest.mark.parametrize("background", [False, True])
def test_the_checkpointer_saves_what_its_contents_hold_after_their_sync_point(tmp_path, background):
    synced: List[int] = []
    saver = checkpointer(tmp_path, objects(), synced, background)
    path = saver.save(Progress(1, 0, 8), final=background)
    saver.finish()
    assert synced == [1] and path == tmp_path / "epoch0001_batch000000.pt" and saver.last_path == path
    saved = Checkpoint.load(path)
    assert (
        saved.progress == Progress(1, 0, 8)
        and saved.config == {"seed": 0}
        and saved.loop_state("validator") == {"pending": 0, "file": None}
    )
    assert saver.is_periodic(4, 2, 10) and not saver.is_periodic(4, 10, 10) and not saver.is_periodic(3, 2, 10)


def test_an_epoch_s_checkpoint_is_named_after_that_epoch_and_holds_the_next_one_s_start(tmp_path):
    """The log's "epoch 5" was epoch0006_batch000000.pt: the file is named as the log numbers epochs, its state
    says where training continues (what a resume reads, from files of either naming)."""
    saver = checkpointer(tmp_path, objects(), [])
    path = saver.save(Progress(6, 0, 114), named=Progress(5, 19, 114))
    assert path == tmp_path / "epoch0005_batch000019.pt" and Checkpoint.load(path).progress == Progress(6, 0, 114)
    older = saver.save(Progress(7, 0, 133))  # as earlier versions named the end of epoch 6
    assert [p.name for p in saver.store.numbered()] == [older.name, path.name]  # ordered as training went


def test_the_checkpointer_refuses_non_finite_weights(tmp_path):
    state = objects()
    with torch.no_grad():
        state.model.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteError, match="its checkpoint was not written"):
        checkpointer(tmp_path, state, []).save(Progress(1, 0, 8))
    assert not list(tmp_path.glob("*.pt"))


def test_a_committed_validation_records_the_best_file_then_links_best_pt(tmp_path):
    saver = checkpointer(tmp_path, objects(), [])
    first = saver.save(Progress(1, 0, 10))
    saver.commit_validation(validation(0, first.name))
    saver.save(Progress(2, 0, 20))
    saver.commit_validation(validation(1, first.name))
    assert saver.store.best == first.name and saver.best_path().samefile(first)  # best.pt is a link to it
    second = tmp_path / "epoch0002_batch000000.pt"
    state = {"metric": "top1", "value": 0.5, "file": first.name, "pending": None}
    assert read_record(second) == ValidationRecord(1, 20, {"top1": 1.5}, state)
    assert Checkpoint.load(second).loop_state("checkpointer") is None  # the validator's state alone names it
    # a best rebuilt under another monitor: the file whose record is of that epoch
    assert saver.file_validated_at(1) == second.name and saver.file_validated_at(None) is None


def test_the_validation_record_keeps_its_on_disk_form_and_reads_older_files(tmp_path):
    checkpoint = tmp_path / "epoch0001_batch000000.pt"
    record = ValidationRecord(0, 5, {"top1": float("nan")}, {"value": None, "file": "epoch0001_batch000000.pt"})
    write_record(checkpoint, record)
    assert list(json.loads(record_path(checkpoint).read_text())) == ["epoch", "step", "metrics", "validator"]
    back = read_record(checkpoint)
    assert back.epoch == 0 and back.metrics.keys() == {"top1"} and back.validator == record.validator
    older_saved = {"checkpointer": {"best": "epoch0003_batch000000.pt"}, "validator": {"value": 0.1}}.get
    assert validator_as_of(checkpoint, back, older_saved) == record.validator
    # an older version's: the best file as the record's own key, or only in its checkpoint's checkpointer state
    for best in ("epoch0002_batch000000.pt", None):
        old = {"epoch": 3, "step": 9, "metrics": {}, "validator": {"value": 0.2}, "best": best}
        record_path(checkpoint).write_text(json.dumps(old))
        assert read_record(checkpoint).validator == {"value": 0.2, "file": best}
    record_path(checkpoint).write_text(json.dumps({"epoch": 3, "step": 9, "metrics": {}, "validator": {}}))
    older = read_record(checkpoint)
    assert older.validator == {}
    assert validator_as_of(checkpoint, older, older_saved) == {"file": "epoch0003_batch000000.pt"}
    assert validator_as_of(checkpoint, None, older_saved) == {"value": 0.1, "file": "epoch0003_batch000000.pt"}
    assert validator_as_of(checkpoint, None, {}.get) == {}
    record_path(checkpoint).write_text("{cut short")
    assert read_record(checkpoint) is None


def test_progress_names_the_epoch_to_continue_from_and_the_epoch_its_weights_are_of():
    assert Progress(2, 0, 20).trained_epoch == 1 and Progress(2, 3, 23).trained_epoch == 2
    assert Progress(1, 10, 20).rolled_over(10) == Progress(2, 0, 20) and Progress(1, 4, 14).rolled_over(10) == Progress(
        1, 4, 14
    )


class Evaluations:
    """A fake ``evaluate``: returns the queued metrics, and records what it evaluated."""

    def __init__(self, *results: Dict[str, float]) -> None:
        self.results, self.calls = list(results), []

    def __call__(self, model: nn.Module, loader: Any, split: str) -> Dict[str, float]:
        self.calls.append((model, loader, split))
        return dict(self.results.pop(0))


def test_the_validator_owns_what_is_pending_and_scores_the_model_and_its_ema():
    model, ema = nn.Linear(2, 2), nn.Linear(2, 2)
    evaluate = Evaluations({"top1": 0.4}, {"top1": 0.6}, {"top1": 0.3}, {"top1": 0.5})
    validator = Validator("val loader", every=2, monitor="top1", use_ema=True, scoring=Scoring(evaluate, model, ema))
    validator.epoch_trained(0, last=False)
    assert validator.pending is None  # not due: every 2 epochs
    validator.epoch_trained(1, last=False)
    assert validator.pending == 1 and validator.state_dict()["pending"] == 1  # saved in the epoch's checkpoint
    outcome = validator.run_pending(step=8, checkpoint=Path("ckpt/epoch0002_batch000000.pt"))
    assert (outcome.epoch, outcome.step, outcome.metrics) == (1, 8, {"top1": 0.4, "ema_top1": 0.6})
    assert [(m, split) for m, _, split in evaluate.calls] == [
        (model, "val"),
        (ema, "val_ema"),
    ] and validator.pending is None
    recorded = outcome.to_dict()["validator"]  # what its checkpoint's record keeps: the best, the file it validated
    assert (recorded["value"], recorded["epoch"], recorded["file"]) == (0.6, 1, "epoch0002_batch000000.pt")
    validator.epoch_trained(2, last=True)  # the last epoch is always validated
    not_best = validator.run_pending(step=12, checkpoint=Path("ckpt/epoch0003_batch000000.pt"))
    assert (not_best.validator["epoch"], not_best.validator["file"]) == (1, "epoch0002_batch000000.pt")


def test_the_validator_stops_after_patience_evaluations_without_improvement():
    evaluate = Evaluations({"loss": 1.0}, {"loss": 2.0}, {"loss": 3.0})
    validator = Validator(None, monitor="loss", mode="min", patience=2, scoring=Scoring(evaluate, nn.Linear(1, 1)))
    stops = []
    for epoch in range(3):
        validator.epoch_trained(epoch, last=False)
        validator.run_pending(step=epoch)
        stops.append(validator.should_stop)
    assert stops == [False, False, True] and validator.tracker.should_stop


def test_a_start_point_reads_where_training_continues_and_the_best_once(tmp_path):
    source = objects(0, best="epoch0001_batch000000.pt")
    checkpoint = Checkpoint(snapshot_training_state(source, Progress(2, 3, 23), RunRecord()), tmp_path / "a.pt")
    start = start_point(Chosen(tmp_path / "a.pt", None, checkpoint), guard=lambda checkpoint: True)
    assert start.progress == Progress(2, 3, 23) and start.record is None and start.path == tmp_path / "a.pt"
    assert start.best.file == "epoch0001_batch000000.pt"  # no record: the best the checkpoint's own state names
    assert start.validator == {"pending": 0, "file": "epoch0001_batch000000.pt"}
    assert start.checkpoint is checkpoint  # read once, by rank 0
    state = {"metric": "top1", "mode": "max", "value": 0.7, "epoch": 1, "file": "epoch0002_batch000000.pt"}
    record = ValidationRecord(1, 20, {"top1": 0.7}, {**state, "pending": None})
    moved = start_point(Chosen(tmp_path / "a.pt", record, checkpoint), guard=lambda checkpoint: False)
    assert moved.progress == Progress(2, 0, 23) and moved.record is record and moved.validator == record.validator
    assert moved.best == Best("top1", 0.7, 1, "epoch0002_batch000000.pt")
