"""A torchvision of another build than torch (a CPU torch beside a CUDA torchvision) is one line at start, naming
both versions and the fix: such an install trained the quick start, then failed predict, the ResNet and video
configs and the tests' collection with ``operator torchvision::nms does not exist`` tracebacks. The failure is
simulated by a torchvision on the path whose import raises what the real one raises."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, subprocess_env
from utils.torchvision_check import looks_paired, mismatch

NMS = "operator torchvision::nms does not exist"
TORCH = importlib.metadata.version("torch")


def fake_torchvision(folder: Path, version: str, raises: str = f"RuntimeError({NMS!r})") -> dict:
    """An environment whose ``torchvision`` is ``version`` (its metadata) and raises ``raises`` on import."""
    (folder / "torchvision").mkdir(parents=True)
    (folder / "torchvision" / "__init__.py").write_text(f"raise {raises}\n")
    info = folder / f"torchvision-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torchvision\nVersion: {version}\n")
    env = subprocess_env()
    env["PYTHONPATH"] = f"{folder}:{env['PYTHONPATH']}"
    return env


def check_in(env: dict) -> subprocess.CompletedProcess:
    """``check_torchvision`` in a fresh process (no torch import: a tenth of a second)."""
    code = "from utils.torchvision_check import check_torchvision; check_torchvision(); print('paired')"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_a_pair_of_one_release_and_one_build_is_taken_without_importing_torchvision():
    assert looks_paired("2.14.1+cpu", "0.29.1+cpu") and looks_paired("2.14.1", "0.29.0")
    assert not looks_paired("2.14.1+cpu", "0.29.1")  # the CPU torch beside PyPI's CUDA torchvision
    assert not looks_paired("2.14.1", "0.28.1") and not looks_paired("3.0.0", "0.45.0")  # another release: imported


def test_the_line_names_both_versions_and_the_torchvision_to_install():
    line = mismatch("2.14.1+cpu", "0.29.1", RuntimeError(NMS + "\nmore lines"))
    assert line == (
        f"torch 2.14.1+cpu and torchvision 0.29.1 are not a matching pair: import torchvision failed (RuntimeError: {NMS}); "
        "install the torchvision built for this torch: pip install --force-reinstall --no-deps 'torchvision==0.29.*' "
        "--index-url https://download.pytorch.org/whl/cpu (or both from one index: README.md, Install)"
    )
    assert "'torchvision==0.29.*' (or both" in mismatch("2.14.1", "0.29.1+cu130", RuntimeError(NMS))  # PyPI's torch


def test_a_torchvision_of_another_build_is_an_install_error_and_another_failure_keeps_its_traceback(tmp_path):
    broken = check_in(fake_torchvision(tmp_path / "a", "0.29.1+cu999"))
    assert broken.returncode == 1 and "InstallError: torch " in broken.stderr and NMS in broken.stderr, broken.stderr
    other = check_in(fake_torchvision(tmp_path / "b", "0.29.1+cu999", "ImportError('No module named PIL')"))
    assert "ImportError: No module named PIL" in other.stderr and "InstallError" not in other.stderr, other.stderr
    paired = check_in(
        fake_torchvision(tmp_path / "c", f"0.{int(TORCH.split('.')[1]) + 15}.0+{TORCH.partition('+')[2]}")
    )
    assert paired.stdout == "paired\n" or not TORCH.startswith("2."), paired.stderr  # never imported: it would raise


@pytest.mark.slow  # main.py and pytest in fresh processes
def test_main_and_the_suite_stop_on_one_line_before_anything_imports_torchvision(tmp_path):
    env = fake_torchvision(tmp_path / "site", "0.29.1+cu999")
    for command in (
        ["main.py", f"experiment.output_root={tmp_path / 'output'}"],
        ["main.py", "--mode", "pack", "--output", str(tmp_path / "packed")],
        ["-m", "pytest", "--collect-only", "-q", "tests/core/test_tree.py", "-p", "no:cacheprovider"],
    ):
        done = subprocess.run(
            [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        assert done.returncode == 2 and "Traceback" not in done.stderr, (command, done.stdout, done.stderr)
        assert any(  # pytest prefixes its reason for stopping with "Exit: "
            line.split("Exit: ")[-1].startswith(
                f"error: torch {TORCH} and torchvision 0.29.1+cu999 are not a matching pair"
            )
            for line in lines
        ), (command, lines)
    assert not (tmp_path / "output").exists() and not (tmp_path / "packed").exists()
