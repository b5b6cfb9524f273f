"""One run per output folder: a second run on a folder in use stops at once; a fresh run does not
mix into another run's checkpoints unless ``train.overwrite=true`` moves them aside."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import main
from tests.conftest import ROOT, fast_overrides, subprocess_env
from tests.dist_utils import PYTHON
from utils.checkpoint.lock import RunLock
from utils.checkpoint.store import CheckpointStore


def start(out: Path, *extra: str) -> subprocess.Popen:
    cmd = [PYTHON, "main.py", *fast_overrides(out, "shared", epochs=50), "threads=1", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


@pytest.mark.timeout(300)
def test_a_second_run_on_a_folder_in_use_stops_at_once_naming_the_holder(tmp_path):
    first = start(tmp_path)
    try:
        lock = tmp_path / "shared" / ".lock"
        deadline = time.monotonic() + 120
        while not (lock.is_file() and "host" in lock.read_text()):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()[1][-3000:]
            time.sleep(0.05)
        second = subprocess.run([PYTHON, "main.py", *fast_overrides(tmp_path, "shared", epochs=1)], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120)
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    assert second.returncode == 2, second.stderr[-3000:]
    errors = [line for line in second.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: experiment 'shared' is in use by another run (pid {first.pid} on host {socket.gethostname()}; lock '{lock}'); "
        "use another experiment.name, or wait until that run ends and continue it with --resume"
    ], second.stderr
    assert "Traceback" not in second.stderr
    after = RunLock(tmp_path / "shared", "shared")  # the kernel released the killed run's lock
    after.acquire()
    after.release()


def test_a_fresh_run_refuses_the_checkpoints_of_a_finished_run(tmp_path, capsys):
    run = [*fast_overrides(tmp_path, "done", epochs=1), "threads=1"]
    assert main.main(run) == 0
    capsys.readouterr()
    assert main.main(run) == 2  # same folder, no --resume: the lock is free, the checkpoints are not
    assert "already holds checkpoints of another run" in capsys.readouterr().err


def test_overwrite_moves_the_old_checkpoints_aside_and_the_new_run_keeps_its_own(tmp_path):
    long_run = [*fast_overrides(tmp_path, "again", epochs=3), "threads=1"]
    assert main.main(long_run) == 0
    assert main.main([*fast_overrides(tmp_path, "again", epochs=1), "threads=1", "train.overwrite=true"]) == 0
    folder = tmp_path / "again"
    (aside,) = (folder / "replaced").iterdir()
    assert [p.name for p in CheckpointStore(aside / "checkpoints").numbered()] == ["epoch0003_batch000000.pt", "epoch0002_batch000000.pt"]
    assert (aside / "metrics.jsonl").is_file() and (aside / "config.yaml").is_file()
    # the new run's own checkpoint is kept, not pruned as older than the old run's epoch 3
    assert [p.name for p in CheckpointStore(folder / "checkpoints").numbered()] == ["epoch0001_batch000000.pt"]
    assert main.main([*fast_overrides(tmp_path, "again", epochs=2), "threads=1", "--resume"]) == 0
    assert [p.name for p in CheckpointStore(folder / "checkpoints").numbered()] == ["epoch0002_batch000000.pt", "epoch0001_batch000000.pt"]
