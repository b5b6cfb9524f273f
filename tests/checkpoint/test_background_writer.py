"""``train.async_checkpoint``'s parts: the CPU copy the loop hands over, one write in flight, errors kept."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from utils.checkpoint.background import BackgroundWriter, cpu_copy
from utils.errors import CheckpointError


def test_the_copy_does_not_change_when_training_changes_the_live_tensors():
    weight = torch.ones(3)
    state = {
        "model": {"w": weight},
        "optimizer": {"state": {0: {"exp_avg": weight * 2}}, "param_groups": [{"lr": 0.1, "params": [0]}]},
        "rng": [(1, 2)],
    }
    copy = cpu_copy(state)
    weight.add_(5)  # the next training step
    assert torch.equal(copy["model"]["w"], torch.ones(3))
    assert copy["optimizer"]["param_groups"] == [{"lr": 0.1, "params": [0]}] and copy["rng"] == [(1, 2)]
    assert copy["model"]["w"].data_ptr() != weight.data_ptr()


def test_at_most_one_write_is_in_flight():
    writer, events, release = BackgroundWriter(), [], threading.Event()

    def slow(name):
        def write():
            events.append(f"{name} start")
            release.wait(5)
            events.append(f"{name} end")

        return write

    writer.submit(slow("first"))
    threading.Timer(0.2, release.set).start()
    started = time.monotonic()
    writer.submit(slow("second"))  # waits for the first to end
    assert time.monotonic() - started >= 0.15
    writer.wait()
    assert events == ["first start", "first end", "second start", "second end"]
    assert not writer.busy


def test_a_failed_write_is_raised_once_at_the_next_checkpoint_point():
    writer = BackgroundWriter()

    def fails():
        raise CheckpointError("could not write checkpoint 'x.pt' (No space left on device)")

    writer.submit(fails)
    with pytest.raises(CheckpointError, match="No space left"):
        writer.submit(lambda: None)  # the next checkpoint reports it, and does not start
    writer.wait()  # reported once


def test_the_next_copy_reuses_the_previous_copys_memory_where_shapes_match():
    weight, step = torch.ones(4), torch.zeros(2)
    first = cpu_copy({"w": weight, "s": [step]})
    weight.mul_(3)
    second = cpu_copy({"w": weight, "s": [torch.zeros(3)]}, reuse=first)
    assert second["w"].data_ptr() == first["w"].data_ptr() and torch.equal(second["w"], torch.full((4,), 3.0))
    assert second["s"][0].shape == (3,)  # another shape: new memory
