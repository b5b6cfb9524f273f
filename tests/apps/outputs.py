"""What the tests of predict and export check about the files they write: a real, small tmpfs for the
write failures (as tests/checkpoint/test_write_failures.py makes one), no partial file, one error line."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path
from typing import Iterator, List

import pytest


@contextlib.contextmanager
def small_disk(folder: Path, size: str) -> Iterator[Path]:
    """``folder`` as a tmpfs of ``size`` (e.g. ``16k``); the test is skipped where mounting is not permitted (needs root)."""
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def partial_files(folder: Path) -> List[Path]:
    """Files a failed write may have left: empty ones, and temporary (hidden) files or folders."""
    return sorted(p for p in folder.rglob("*") if p.name.startswith(".") or (p.is_file() and p.stat().st_size == 0))


def one_error(capsys) -> str:
    """The one ``error:`` line of a run that failed as a UserError (and no traceback, not even a logging one)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]
