"""One folder per run: a fresh run never mixes with the experiment's earlier runs, --resume continues
the newest (or the folder it is given), test mode writes into its own folder, and a run in use is
locked."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

import main
from tests.conftest import ROOT, fast_overrides, subprocess_env
from tests.fixtures.dist_utils import PYTHON
from tests.fixtures.metrics_rows import rows
from utils.engine.trainer import Trainer
from utils.run.folder import RunFolder, numbered
from utils.run.unfinished import finished


def start(out: Path, *extra: str) -> subprocess.Popen:
    cmd = [PYTHON, "main.py", *fast_overrides(out, "shared", epochs=1000), "threads=1", *extra]
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def snapshot(folder: Path) -> dict:
    """Every file under ``folder`` and its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_resuming_a_run_in_use_stops_at_once_naming_the_holder_and_a_fresh_run_gets_its_own_folder(tmp_path, capsys):
    # the holder, in a process of its own, idle between its steps: the other two run here while it holds the folder
    first = start(tmp_path, "custom_imports=[tests.fixtures.idle_steps]", "hooks=[{name: idle_steps, seconds: 0.05}]")
    try:
        lock = tmp_path / "shared" / "run_001" / ".lock"
        deadline = time.monotonic() + 120
        while not (
            lock.is_file() and "host" in lock.read_text() and (lock.parent / "checkpoints" / "last.pt").is_file()
        ):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()[1][-3000:]
            time.sleep(0.05)
        again = fast_overrides(tmp_path, "shared", epochs=1)
        capsys.readouterr()
        second = main.main([*again, "--resume"])
        refused = capsys.readouterr().err
        fresh = main.main(again)
        assert first.poll() is None, "the first run ended before the second was refused"
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    assert second == 2, refused[-3000:]
    errors = [line for line in refused.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: run folder '{lock.parent}' is in use by another run (pid {first.pid} on host {socket.gethostname()}; lock '{lock}'); "
        "wait until that run ends and continue it with --resume, or start a fresh run (without --resume)"
    ], refused
    assert "Traceback" not in refused
    assert fresh == 0  # the same command, not resuming: a folder of its own
    assert [r.path.name for r in numbered(tmp_path / "shared")] == ["run_001", "run_002"]
    after = RunFolder(lock.parent)  # the kernel released the killed run's lock
    after.lock()
    after.release()


def test_the_same_command_twice_makes_two_runs_and_resume_and_test_mode_keep_them_apart(tmp_path, capsys):
    args = [*fast_overrides(tmp_path, "twice", epochs=1), "threads=1"]
    experiment = tmp_path / "twice"
    assert main.main(args) == 0
    first = snapshot(experiment / "run_001")
    assert main.main(args) == 0  # the same command again: a new run, the first untouched
    assert snapshot(experiment / "run_001") == first
    assert os.readlink(experiment / "latest") == "run_002"

    # both finished: --resume alone continues neither, and names the newest
    assert main.main([*args, "train.epochs=2", "--resume"]) == 2
    assert (
        f"error: --resume: every run of '{experiment}' finished (the newest, run_002, tested its best checkpoint); "
        f"a finished run is continued only when named: --resume {experiment / 'run_002'}" in capsys.readouterr().err
    )
    assert sorted(p.name for p in experiment.iterdir()) == ["latest", "run_001", "run_002"]
    # named, it continues; its records gain the new epoch once
    assert main.main([*args, "train.epochs=2", "--resume", str(experiment / "run_002")]) == 0
    assert [(r["split"], r["epoch"]) for r in rows(experiment / "run_002")] == [
        ("val", 0),
        ("test", 0),
        ("val", 1),
        ("test", 1),
    ]
    # --resume with a run folder continues that one
    assert main.main([*args, "train.epochs=2", "--resume", str(experiment / "run_001")]) == 0
    assert (experiment / "run_001" / "checkpoints" / "epoch0001_batch000019.pt").is_file()  # epoch 1's end
    capsys.readouterr()

    # --mode test writes into a folder of its own: the training run's records stay byte-identical
    trained = snapshot(experiment / "run_002")
    assert main.main(["--mode", "test", "--checkpoint", str(experiment / "run_002" / "checkpoints" / "best.pt")]) == 0
    assert "test: top1=" in capsys.readouterr().out
    assert snapshot(experiment / "run_002") == trained
    tested = experiment / "test_001"
    assert (
        (tested / "log.txt").is_file()
        and (tested / "config.yaml").is_file()
        and list((tested / "tb").glob("events.out.tfevents.*"))
    )
    (row,) = rows(tested)
    assert row["split"] == "test" and row["step"] == 38 and row["epoch"] == 1  # the step and epoch the weights are of


def test_a_folder_of_an_earlier_version_resumes_in_place(tmp_path, capsys, monkeypatch):
    """Framework 0.2's layout, and the checkpoint names of 0.3 and older: an epoch's end named after the next epoch
    (epoch0001_batch000000.pt where the log said "epoch 0")."""
    args = [*fast_overrides(tmp_path, "old", epochs=1), "threads=1"]
    named_as_before = Trainer._checkpoint
    monkeypatch.setattr(Trainer, "_checkpoint", lambda self, position, named=None: named_as_before(self, position))
    assert main.main(args) == 0
    monkeypatch.undo()
    experiment = tmp_path / "old"
    assert (experiment / "run_001" / "checkpoints" / "epoch0001_batch000000.pt").is_file()
    for entry in (experiment / "run_001").iterdir():  # the layout of framework 0.2: everything under <experiment>/
        entry.rename(experiment / entry.name)
    (experiment / "run_001").rmdir()
    (experiment / "latest").unlink()
    assert main.main([*args, "train.epochs=2", "--resume"]) == 0
    assert "training state restored: epoch 1, step 19" in capsys.readouterr().err
    assert not (experiment / "run_001").exists()
    # epoch 1's end, named as the log numbers it, after the older name of epoch 0's end
    assert os.path.samefile(
        experiment / "checkpoints" / "epoch0001_batch000019.pt", experiment / "checkpoints" / "last.pt"
    )


def test_resume_from_an_older_checkpoint_branches_into_a_new_run_and_from_the_newest_continues(tmp_path, capsys):
    args = [*fast_overrides(tmp_path, "branch", epochs=2), "threads=1", "train.keep_checkpoints=3"]
    experiment = tmp_path / "branch"
    assert main.main(args) == 0
    first = snapshot(experiment / "run_001")
    older = experiment / "run_001" / "checkpoints" / "epoch0000_batch000019.pt"
    assert main.main([*args, "--resume", str(older)]) == 0  # epoch 1 again, in a run of its own
    assert snapshot(experiment / "run_001") == first
    branch = experiment / "run_002" / "checkpoints"
    assert (
        os.path.samefile(branch / "epoch0000_batch000019.pt", older) or (branch / "epoch0000_batch000019.pt").is_file()
    )
    assert (branch / "epoch0001_batch000019.pt").is_file() and (branch / "best.pt").is_file()
    # last.pt of a run's newest checkpoint continues that very run
    assert (
        main.main([*fast_overrides(tmp_path, "branch", epochs=3), "threads=1", "--resume", str(branch / "last.pt")])
        == 0
    )
    assert (branch / "epoch0002_batch000019.pt").is_file() and not (experiment / "run_003").exists()
    capsys.readouterr()
    # a branch refused by the resume guard (another seed) leaves no folder, and latest where it was
    latest = os.readlink(experiment / "latest")
    assert main.main([*args, "seed=5", "--resume", str(older)]) == 2
    assert "seed: 0 -> 5" in capsys.readouterr().err
    assert not (experiment / "run_003").exists() and os.readlink(experiment / "latest") == latest


def test_resume_alone_continues_the_newest_run_that_did_not_finish_and_says_which(tmp_path, caplog):
    """A bare --resume continued the newest run although it had finished and an older one had been killed."""
    caplog.set_level(logging.INFO)
    args = [*fast_overrides(tmp_path, "two", epochs=1), "threads=1", "train.iterations=2"]
    experiment = tmp_path / "two"
    assert main.main(args) == 0 and main.main(args) == 0
    metrics = experiment / "run_001" / "metrics.jsonl"  # killed after its last checkpoint, before its test
    metrics.write_text("".join(line for line in metrics.read_text().splitlines(True) if '"test"' not in line))
    caplog.clear()
    assert main.main([*args, "--resume"]) == 0
    assert (
        f"run folder {experiment / 'run_001'} (continued: the newest run that did not finish; run_002 finished, "
        f"continued only when named: --resume {experiment / 'run_002'})" in caplog.text
    )
    assert "training state restored: epoch 0, step 2" in caplog.text and finished(RunFolder(experiment / "run_001"))
    assert not (experiment / "run_003").exists()


def test_resume_passes_over_an_empty_run_and_rewrites_a_validation_row_lost_in_a_crash(tmp_path, capsys):
    args = [*fast_overrides(tmp_path, "lost", epochs=1), "threads=1"]
    experiment = tmp_path / "lost"
    assert main.main(args) == 0
    metrics = experiment / "run_001" / "metrics.jsonl"
    first = rows(metrics)
    metrics.write_text('{"split": "test", "ep')  # the validation's row lost after its record, a row cut short
    (experiment / "run_002").mkdir()  # a start that failed before its first checkpoint
    assert main.main([*args, "train.epochs=2", "--resume"]) == 0
    again = rows(metrics)
    assert again[0] == first[0] and [(r["split"], r["epoch"]) for r in again] == [
        ("val", 0),
        ("val", 1),
        ("test", 1),
    ]
    assert "not JSON" in capsys.readouterr().err
