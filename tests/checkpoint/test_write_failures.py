"""A checkpoint write that fails (full disk, a short write torch reports as a RuntimeError, a failed
best.pt) stops the run with one ``error:`` line and exit code 2; the folder resumes afterwards and
the resumed run tests what an uninterrupted run tests."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import List

import pytest

import main
from utils.checkpoint import files

# the default network (3.5 MB checkpoints): two do not fit on a 6 MB disk
ARGS = ["train.epochs=2", "threads=1"]


def args(out: Path, *extra: str) -> List[str]:
    return [f"experiment.output_root={out}", "experiment.name=full", *ARGS, *extra]


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def final_test(capsys) -> str:
    return [line for line in capsys.readouterr().out.splitlines() if line.startswith("test:")][-1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("reference")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main.main(args(out)) == 0
    return [line for line in buffer.getvalue().splitlines() if line.startswith("test:")][-1]


@pytest.fixture
def small_disk(tmp_path):
    """A real 6 MB tmpfs (skipped where mounting is not permitted)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if (
        shutil.which("mount") is None
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(disk)], capture_output=True).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_full_disk_is_one_line_and_the_folder_resumes_on_a_larger_disk(small_disk, tmp_path, reference, capsys):
    assert main.main(args(small_disk)) == 2
    error = one_error(capsys)
    assert (
        "could not write checkpoint" in error
        and "No space left on device" in error
        and "epoch0000_batch000019.pt' is intact" in error
    ), error
    assert not [p for p in (small_disk / "full" / "latest" / "checkpoints").iterdir() if p.name.startswith(".")]
    # moved to a larger disk (hard links become copies)
    shutil.copytree(small_disk / "full", tmp_path / "larger" / "full", symlinks=True)
    assert main.main([*args(tmp_path / "larger"), "--resume"]) == 0
    assert final_test(capsys) == reference


@pytest.mark.parametrize("background", [False, True], ids=["sync", "async"])
def test_a_short_write_reported_by_torch_as_runtime_error_is_the_one_line_error(
    tmp_path, reference, monkeypatch, capsys, background
):
    """Also when the write runs in the background (train.async_checkpoint): its error is the same
    line, raised in the training thread at the next checkpoint point or the end of training."""
    writers = []
    real_write_all = files.HashingWriter._write_all

    def fills_the_disk(self, view):
        if self not in writers:
            writers.append(self)
        if len(writers) == 2 and self.size > 100_000:  # the second checkpoint, part-way through
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write_all(self, view)

    monkeypatch.setattr(files.HashingWriter, "_write_all", fills_the_disk)
    mode = f"train.async_checkpoint={str(background).lower()}"
    assert main.main(args(tmp_path, mode)) == 2
    error = one_error(capsys)
    assert "No space left on device" in error and "epoch0000_batch000019.pt' is intact" in error, error
    monkeypatch.undo()
    assert main.main([*args(tmp_path), mode, "--resume"]) == 0
    assert final_test(capsys) == reference


def test_a_failed_best_pt_never_blocks_the_resume_which_tests_the_recorded_best(
    tmp_path, reference, monkeypatch, capsys
):
    real_replace = os.replace
    best_writes = []

    def best_fails(src, dst):
        if os.path.basename(dst) == "best.pt":
            best_writes.append(dst)
            if len(best_writes) == 2:  # the second best epoch: best.pt still holds the first
                raise OSError(errno.ENOSPC, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", best_fails)
    assert main.main(args(tmp_path)) == 2
    assert "No space left on device" in one_error(capsys)
    monkeypatch.undo()
    assert main.main([*args(tmp_path), "--resume"]) == 0
    assert final_test(capsys) == reference


def test_a_full_disk_under_the_config_or_the_metrics_is_one_line_too(tmp_path, monkeypatch, capsys):
    real_open = os.open  # every write under a run folder opens through it (utils/files/owned.py)

    def full(path, *args, **kwargs):
        if str(path).endswith("metrics.jsonl"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("os.open", full)
    assert main.main(args(tmp_path, "train.epochs=1")) == 2
    assert re.search(
        r"could not write '.*metrics.jsonl' \(No space left on device\); free disk space", one_error(capsys)
    )
