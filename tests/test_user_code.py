"""A user's own code, dropped into the plugin folders of a copy of the repo: found by name,
and its bugs shown with a traceback that names the user's file and line (exit 1), while
bad input stays one line (exit 2)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import ROOT, subprocess_env

BUGGY_NET = '''
from torch import nn

from utils.registry import BACKBONES, NETWORKS


@NETWORKS.register()
class BuggyNet(nn.Module):
    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.cfg = {"width": 8}
        self.backbone = BACKBONES.build("small_cnn", widths=[8])
        self.head = nn.Linear(8, num_classes)

    def forward(self, x):
        width = self.cfg["widht"]  # the typo this test is about
        return self.head(self.backbone(x)[-1].mean(dim=(2, 3))) * width
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the project (code only) with the user's files in its plugin folders."""
    copy = tmp_path_factory.mktemp("repo") / "project"
    ignore = shutil.ignore_patterns(".git", ".venv", "venv", "output", "__pycache__", "*.egg-info", ".pytest_cache", "docs")
    shutil.copytree(ROOT, copy, ignore=ignore)
    (copy / "network" / "buggy_net.py").write_text(textwrap.dedent(BUGGY_NET))
    return copy


def run_main(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = subprocess_env()
    env["PYTHONPATH"] = str(repo)  # the copy, not the checkout the tests run from
    cmd = [sys.executable, "main.py", f"experiment.output_root={repo / 'output'}", "train.epochs=1", *args]
    return subprocess.run(cmd, cwd=repo, env=env, capture_output=True, text=True, timeout=240)


def test_a_bug_in_a_user_network_shows_its_traceback_and_exits_1(repo):
    proc = run_main(repo, "model.name=buggy_net", "model.args={num_classes: 10}", "experiment.name=buggy")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback (most recent call last)" in proc.stderr
    line = BUGGY_NET.splitlines().index('        width = self.cfg["widht"]  # the typo this test is about') + 1
    assert f'network/buggy_net.py", line {line}, in forward' in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.rstrip().endswith("KeyError: 'widht'")
    assert "error:" not in proc.stderr


def test_an_unknown_name_is_still_one_line_and_exit_2(repo):
    proc = run_main(repo, "model.name=bugy_net", "experiment.name=unknown")
    assert proc.returncode == 2
    assert [line for line in proc.stderr.splitlines() if line.startswith("error:")] == [proc.stderr.strip().splitlines()[-1]]
    assert "unknown network 'bugy_net'" in proc.stderr and "did you mean 'buggy_net'" in proc.stderr
    assert "Traceback" not in proc.stderr
