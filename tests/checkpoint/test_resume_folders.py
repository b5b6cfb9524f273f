"""``--resume`` into a folder it cannot use: one that is no run (nothing is written into it), an experiment
folder (its newest run is named), and a run folder on a read-only file system (one error line).

(The run they resume is trained once for the package: tests/checkpoint/conftest.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess

import main
from tests.conftest import fast_overrides
from tests.fixtures.crafted import errors_of


def test_resume_into_a_folder_that_is_no_run_writes_nothing(best, tmp_path, capsys):
    stranger = tmp_path / "my_documents"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    args = fast_overrides(tmp_path / "out", "x", epochs=1)
    assert main.main([*args, "--resume", str(stranger)]) == 2
    assert "is not a run folder" in errors_of(capsys)[0]
    assert sorted(p.name for p in stranger.iterdir()) == ["notes.txt"]
    assert main.main([*args, "--resume", str(best.parents[2])]) == 2  # an experiment folder: names its newest run
    assert "it holds runs: --resume" in errors_of(capsys)[0] and not (best.parents[2] / ".lock").exists()


def test_a_read_only_run_folder_on_resume_is_one_line(best, tmp_path, capsys, monkeypatch):
    disk = tmp_path / "ro"
    disk.mkdir()
    mounted = (
        shutil.which("mount") is not None
        and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)], capture_output=True
        ).returncode
        == 0
    )
    try:
        shutil.copytree(best.parents[2], disk / "t", symlinks=True)
        if not mounted or subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True).returncode != 0:
            real = os.open  # no root here: the lock's open fails as on a read-only file system
            monkeypatch.setattr(
                os,
                "open",
                lambda path, *a: (
                    (_ for _ in ()).throw(OSError(30, "Read-only file system"))
                    if str(path).endswith(".lock")
                    else real(path, *a)
                ),
            )
        args = [
            f"experiment.output_root={disk}",
            "experiment.name=t",
            "train.epochs=2",
            "model.args.backbone_args={widths: [8, 16]}",
            "--resume",  # the finished run, named
            str(disk / "t" / "run_001"),
        ]
        assert main.main(args) == 2
        line = errors_of(capsys)[0]
        assert (
            line.startswith("error: cannot take the lock")
            and "Read-only file system" in line
            and "make the folder writable" in line
        )
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(disk)], capture_output=True)
