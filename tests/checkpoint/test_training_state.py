"""The training state: one module writes and reads checkpoints; the format is versioned."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from utils.amp import Amp
from utils.checkpoint.state import (
    FORMAT,
    Checkpoint,
    Progress,
    RunRecord,
    StateObjects,
    network_weights_of,
    snapshot_training_state,
)
from utils.config.schema import AmpConfig
from utils.errors import CheckpointError
from utils.optim.ema import ModelEma


class Counter:
    """A stateful hook."""

    def __init__(self, n: int = 0) -> None:
        self.n = n

    def state_dict(self) -> dict:
        return {"n": self.n}

    def load_state_dict(self, state: dict) -> None:
        self.n = state["n"]


def objects(seed: int, hooks=None) -> StateObjects:
    torch.manual_seed(seed)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 0.5**it)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    return StateObjects(
        model,
        optimizer,
        scheduler,
        Amp(AmpConfig(), torch.device("cpu")),
        ema=ModelEma(model, decay=0.5),
        hooks=hooks or {},
    )


def test_snapshot_then_restore_round_trips_every_object():
    source = objects(0, {"counter": Counter(7)})
    source.ema.update(source.model)
    data = snapshot_training_state(
        source,
        Progress(epoch=3, batch=5, step=41),
        RunRecord({"eval": {"use_ema": True}}, world_size=2, classes=("cat", "dog")),
    )
    assert data["format"] == FORMAT and data["hooks"] == {"counter": {"n": 7}}
    checkpoint = Checkpoint(data, "mem.pt")
    assert (
        checkpoint.progress == Progress(3, 5, 41)
        and checkpoint.world_size == 2
        and checkpoint.classes == ["cat", "dog"]
    )
    assert checkpoint.eval_weights is checkpoint.ema_weights  # the run selected with its EMA

    target = objects(1, {"counter": Counter()})
    target.model.load_state_dict(checkpoint.model_weights)
    checkpoint.restore(target, rank=0)
    assert target.hooks["counter"].n == 7 and target.ema.updates == 1
    assert target.scheduler.state_dict() == source.scheduler.state_dict()
    a, b = source.optimizer.state_dict()["state"][0], target.optimizer.state_dict()["state"][0]
    assert all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)


def test_a_format_2_checkpoint_is_upgraded_with_its_hooks_states_in_the_components():
    data = snapshot_training_state(objects(0, {"counter": Counter(3)}), Progress(1, 0, 9), RunRecord())
    del data["classes"]  # framework 0.2.0 wrote no class list
    best = {"metric": "top1", "value": 0.8, "epoch": 0, "evals_since_best": 0}
    data.update(
        format=2,
        sampler={"epoch": 1, "seed": 0},
        hooks={"validation": best, "checkpoint": {"best": "epoch0001_batch000000.pt"}, "counter": {"n": 3}},
    )
    checkpoint = Checkpoint(data, "v020.pt")
    assert checkpoint.classes is None
    assert checkpoint.loop_state("validator") == {**best, "pending": None}  # format 2 validated before it saved
    assert checkpoint.loop_state("checkpointer") == {"best": "epoch0001_batch000000.pt"}
    target = objects(1, {"counter": Counter()})
    checkpoint.restore(target, rank=0)
    assert target.hooks["counter"].n == 3  # a user's hook keeps its state; no warning about built-in hooks


def test_an_unknown_format_is_a_clear_error():
    data = snapshot_training_state(objects(0), Progress(), RunRecord())
    data["format"] = FORMAT + 1
    with pytest.raises(CheckpointError, match=rf"has format {FORMAT + 1}, but framework .* reads format {FORMAT}"):
        Checkpoint(data, "new.pt")
    with pytest.raises(CheckpointError, match="not a training checkpoint"):
        Checkpoint({"weight": torch.zeros(1)}, "plain.pt")


def test_a_format_1_checkpoint_is_upgraded():
    model = nn.Linear(3, 2)
    old = {
        "model": model.state_dict(),
        "ema": model.state_dict(),
        "ema_updates": 4,
        "optimizer": {},
        "scheduler": {},
        "amp": {},
        "epoch": 2,
        "batch": 6,
        "global_step": 30,
        "best": {"metric": "top1", "value": 0.9, "epoch": 1, "evals_since_best": 0},
        "nonfinite": {"consecutive": 0, "total": 2},
        "sampler": {"epoch": 2, "batches_done": 6},
        "rng": None,
        "world_size": 1,
        "config": {"model": {"name": "classifier"}},
        "version": "0.1.0",
    }
    checkpoint = Checkpoint(old, "old.pt")
    assert checkpoint.progress == Progress(2, 6, 30) and checkpoint.framework == "0.1.0" and checkpoint.classes is None
    assert checkpoint.loop_state("validator")["value"] == 0.9 and checkpoint.loop_state("validator")["pending"] is None
    assert checkpoint.loop_state("nonfinite")["total"] == 2
    assert checkpoint.eval_weights is checkpoint.model_weights  # it did not select with its EMA
    assert network_weights_of(old) is old["model"] and network_weights_of({"state_dict": {"w": 1}}) == {"w": 1}
