"""train.profile fits the run: its steps lie within the training that happens, it records training only,
and a CPU-only machine prints none of the profiler library's GPU lines.

Before: ``train.iterations=2`` with the default schedule logged ``training steps 3-2``, the profiler kept
recording through validation and test, and every run printed ``gpuGetDeviceCount failed`` on stderr."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from tests.conftest import ROOT, fast_overrides, subprocess_env
from utils.hook.profiler import ProfilerHook, fit_schedule


@pytest.mark.parametrize(
    "schedule, steps, fitted",
    [
        ((1, 1, 5), 2, (0, 1, 1)),  # the waiting goes first, one step is recorded
        ((1, 1, 5), 1, (0, 0, 1)),
        ((1, 1, 5), 6, (0, 1, 5)),
        ((2, 1, 3), 100, (2, 1, 3)),  # it fits: as given
        ((1, 1, 5), None, (1, 1, 5)),  # an unknown length: as given (the epoch's end stops it)
    ],
)
def test_the_schedule_shrinks_to_the_steps_the_run_takes(schedule, steps, fitted):
    assert fit_schedule(*schedule, steps) == fitted


def trainer_of(batches: list, iterations=None, step: int = 0, batch: int = 0) -> SimpleNamespace:
    """What the hook reads of a trainer: rank, device, position, loader and config."""
    return SimpleNamespace(
        dist=SimpleNamespace(is_main=True, device=torch.device("cpu")),
        state=SimpleNamespace(step=step, batch=batch),
        parts=SimpleNamespace(train_loader=batches),
        meta=SimpleNamespace(config={"train": {"iterations": iterations, "accumulate": 1}}),
    )


def steps(hook: ProfilerHook, trainer: SimpleNamespace, n: int) -> None:
    for _ in range(n):
        torch.ones(4, 4) @ torch.ones(4, 4)
        trainer.state.step += 1
        hook.after_step(trainer)


def test_a_run_of_two_steps_records_its_second(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    hook, trainer = ProfilerHook(str(tmp_path), wait=1, warmup=1, active=5), trainer_of(list(range(19)), iterations=2)
    hook.before_train(trainer)
    steps(hook, trainer, 2)
    assert hook.profiler is None  # done within the run: nothing records what follows
    assert "profiling wait=0 warmup=1 active=1" in caplog.text
    assert re.search(r"training steps 2-2 \(ProfilerStep#1-#1\)", caplog.text), caplog.text
    assert (tmp_path / "trace.json").is_file()


def test_recording_stops_at_the_epoch_s_end_before_validation(tmp_path, caplog):
    """A loader without a length: the schedule cannot be fitted, the epoch's end stops it."""
    caplog.set_level(logging.INFO)
    hook, trainer = ProfilerHook(str(tmp_path), wait=0, warmup=1, active=5), trainer_of(iter(range(3)))
    hook.before_train(trainer)
    steps(hook, trainer, 3)
    assert hook.profiler is not None
    hook.after_epoch(trainer)
    assert hook.profiler is None
    assert re.search(r"training steps 2-3 \(ProfilerStep#1-#2\)", caplog.text), caplog.text


def test_a_run_shorter_than_the_wait_says_so_instead_of_an_empty_range(tmp_path, caplog):
    hook, trainer = ProfilerHook(str(tmp_path), wait=3, warmup=1, active=2), trainer_of(iter(range(2)))
    hook.before_train(trainer)
    steps(hook, trainer, 2)
    hook.after_epoch(trainer)
    assert "training ended after 2 step(s), before the profiled steps" in caplog.text
    assert "training steps" not in caplog.text and not (tmp_path / "trace.json").exists()


@pytest.mark.slow  # a training process: the profiler's C++ library prints to the process's stderr
@pytest.mark.skipif(torch.cuda.is_available(), reason="the GPU lines are about a CPU-only machine")
def test_a_profiled_cpu_run_prints_no_gpu_lines(tmp_path):
    args = [
        *fast_overrides(tmp_path, "p", epochs=1),
        "train.iterations=2",
        "threads=1",
        "train.profile={wait: 1, warmup: 1, active: 5}",
    ]
    proc = subprocess.run(
        [sys.executable, "main.py", *args], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "training steps 2-2 (ProfilerStep#1-#1)" in proc.stderr
    assert not [line for line in proc.stderr.splitlines() if re.match(r"(ERROR|USDT|STAGE|INFO):\d{4}-", line)], (
        proc.stderr[-3000:]
    )
