"""W&B as a run's tracker, offline (no account, no network): a run killed with kill -9 once W&B had its run, its
records sent by ``python -m utils.trackers sync`` (twice: the second sends nothing), then resumed, keeps one W&B run
id, and its offline files (read with W&B's own record definitions: ``wandb_files.py``) hold the
uninterrupted run's history: the same steps, each once, the same values bit for bit (one process both times)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, RECORDED_DIGITS
from tests.trackers.sync_command import sync
from tests.trackers.wandb_files import history, run_files, run_ids

pytest.importorskip("wandb", reason="W&B is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.slow  # real runs

SETTINGS = [
    *RECORDED_DIGITS,
    "data.batch_size=32",
    "train.epochs=3",
    "train.checkpoint_every_steps=8",
    "train.log_every=4",
    "hooks=[{name: wandb, mode: offline}]",
]
WALL_CLOCK = ("train_epoch/samples_per_s",)
MID_EPOCH = "epoch*_batch0000[012][0-9].pt"  # batch 8, 16 or 24 of an epoch


def command(out: Path, *extra: str) -> dict:
    env = subprocess_env()
    env.update({"REGTRAIN_RECORD": str(out / "record")})
    cmd = [PYTHON, "main.py", f"experiment.output_root={out}", "experiment.name=run", *SETTINGS, *extra]
    return {"args": cmd, "cwd": ROOT, "env": env, "text": True, "start_new_session": True}


def launch(out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(**command(out, *extra), capture_output=True, timeout=240)


def kill_once_written(out: Path) -> None:
    """Start a run, SIGKILL it once W&B has its run file and a checkpoint inside an epoch was written after it (a
    checkpoint every 8 of 39 steps: batch 8, 16 or 24 of its epoch, so the kill comes well before the epoch's end).
    A kill between an epoch's training metrics and its validation, both at the epoch's last step, would leave that
    step in two W&B parts (docs/trackers.md): not what this test measures."""
    proc = subprocess.Popen(**command(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run, deadline = out / "run" / "run_001", time.monotonic() + 120
    while not run_files(run / "trackers"):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.01)
    opened = set((run / "checkpoints").glob("epoch*.pt"))
    while not {p for p in (run / "checkpoints").glob(MID_EPOCH) if p not in opened}:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def without_wall_clock(rows):
    return [
        {k: v for k, v in row.items() if k not in WALL_CLOCK and k not in ("_timestamp", "_runtime")} for row in rows
    ]


@pytest.mark.timeout(600)
def test_a_run_killed_and_resumed_keeps_its_wandb_run_and_the_uninterrupted_history(tmp_path):
    reference = launch(tmp_path / "ref")
    assert reference.returncode == 0, reference.stderr[-3000:]
    # where W&B's offline files went, and the line that sends them
    assert re.search(r"tracker wandb \(offline\): the run is in (\S+); .*: wandb sync \1$", reference.stderr, re.M)
    kill_once_written(tmp_path / "killed")
    identity = tmp_path / "killed" / "run" / "run_001" / "trackers" / "wandb.json"
    before = json.loads(identity.read_text())["run_id"]
    run_folder = tmp_path / "killed" / "run" / "run_001"
    synced = sync(run_folder)
    assert synced.returncode == 0 and "record(s) sent" in synced.stdout, synced.stderr[-3000:]
    again = sync(run_folder)
    assert again.returncode == 0 and ": 0 record(s) sent" in again.stdout, again.stdout + again.stderr[-3000:]
    resumed = launch(tmp_path / "killed", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "training state restored" in resumed.stderr
    assert resumed.stdout.splitlines()[-1].startswith("test: ")  # W&B wrote nothing into the lines scripts read

    run = tmp_path / "killed" / "run" / "latest" / "trackers"
    # the same W&B run in two parts: the sync gave again whole what W&B's process held when it died with the
    # killed run (its unfinished folder removed), and the resumed run the steps after the sync's last
    assert run_ids(run) == [before, before] == [json.loads(identity.read_text())["run_id"]] * 2
    got, want = history(run), history(tmp_path / "ref" / "run" / "latest" / "trackers")
    steps = [row["_step"] for row in got]
    assert steps == sorted(set(steps)), steps  # each step once, in order
    assert without_wall_clock(got) == without_wall_clock(want)
    assert {"train/loss", "val/top1", "test/top1", "train_epoch/steps"} <= set(want[-1]) | set(want[-2])
