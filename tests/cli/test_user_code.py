"""A user's own code, dropped into the plugin folders of a copy of the repo: a network with
lazy modules and a hook, found by name (the registry imports the folders), the hook's events
in the documented order and its state across --resume; and a bug in the user's code shown
with a traceback that names the user's file and line (exit 1), while bad input stays one line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List

import pytest
import torch

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import free_port
from tests.fixtures.forked_main import MainServer

pytestmark = pytest.mark.slow  # main.py in processes of their own on a copy of the repository

LAZY_NET = '''
from torch import nn

from utils.registry import NETWORKS


@NETWORKS.register()
class MyLazyNet(nn.Module):
    """Every layer infers its input size on the first forward."""

    def __init__(self, num_classes: int = 10, hidden: int = 32):
        super().__init__()
        self.backbone = nn.Sequential(nn.LazyConv2d(16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Flatten(), nn.LazyLinear(hidden), nn.ReLU())
        self.head = nn.LazyLinear(num_classes)

    def forward(self, x):
        return self.head(self.backbone(x))
'''

EVENT_RECORDER = '''
import json

from utils.hook import Hook
from utils.registry import HOOKS


@HOOKS.register()
class EventRecorder(Hook):
    """Appends every event it sees to a JSON-lines file; its state is the number of steps seen."""

    def __init__(self, path: str):
        self.path = path
        self.steps = 0

    def _record(self, trainer, event, **extra):
        state = trainer.state
        row = {"event": event, "epoch": state.epoch, "step": state.step, "steps_seen": self.steps, "checkpoint": str(trainer.checkpointer.last_path) if trainer.checkpointer.last_path else None, **extra}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(row) + "\\n")

    def before_train(self, trainer):
        self._record(trainer, "before_train")

    def before_epoch(self, trainer):
        self._record(trainer, "before_epoch")

    def after_step(self, trainer):
        self.steps += 1
        self._record(trainer, "after_step", ema_updates=trainer.parts.ema.updates if trainer.parts.ema is not None else None)

    def after_epoch(self, trainer):
        self._record(trainer, "after_epoch")

    def after_validation(self, trainer, metrics):
        self._record(trainer, "after_validation", metrics=sorted(metrics))

    def after_train(self, trainer):
        self._record(trainer, "after_train")

    def after_test(self, trainer, metrics):
        self._record(trainer, "after_test", metrics=sorted(metrics))

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]
'''

BUGGY_NET = """
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
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the project (code only) with the user's files in its plugin folders."""
    copy = tmp_path_factory.mktemp("repo") / "project"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", "venv", "output", "__pycache__", "*.egg-info", ".pytest_cache", "docs"
    )
    shutil.copytree(ROOT, copy, ignore=ignore)
    (copy / "network" / "buggy_net.py").write_text(textwrap.dedent(BUGGY_NET))
    (copy / "network" / "my_lazy_net.py").write_text(textwrap.dedent(LAZY_NET))
    (copy / "hook" / "event_recorder.py").write_text(textwrap.dedent(EVENT_RECORDER))
    return copy


def copy_env(repo: Path) -> Dict[str, str]:
    env = subprocess_env()
    env["PYTHONPATH"] = str(repo)  # the copy, not the checkout the tests run from
    return env


@pytest.fixture(scope="module")
def server(repo) -> Iterator[MainServer]:
    """The one-process runs are ``python main.py`` in the copy, forked from a process of it that imported torch once."""
    with MainServer(repo, copy_env(repo)) as forking:
        yield forking


def run_main(server: MainServer, repo: Path, *args: str, nproc: int = 1) -> subprocess.CompletedProcess:
    """``python main.py ARGS`` (forked) or a ``torchrun`` job of ``nproc`` ranks in the copy, one epoch unless told."""
    args = (f"experiment.output_root={repo / 'output'}", "train.epochs=1", *args)
    if nproc == 1:
        return server.run(list(args), repo, copy_env(repo), timeout=240)
    launcher = [
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={nproc}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
    ]
    cmd = [sys.executable, *launcher, "main.py", *args]
    return subprocess.run(cmd, cwd=repo, env=copy_env(repo), capture_output=True, text=True, timeout=240)


def test_metrics(proc: subprocess.CompletedProcess) -> Dict[str, float]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("test: ")]
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.eE]+)", line)}


test_metrics.__test__ = False  # a helper, not a test


@pytest.mark.timeout(300)
@pytest.mark.parametrize("nproc", [1, 2])
def test_a_lazy_network_selected_by_class_name_trains_digits(server, repo, nproc):
    args = ["model.name=MyLazyNet", "model.args={num_classes: 10}", "train.epochs=3", f"experiment.name=lazy{nproc}"]
    metrics = test_metrics(run_main(server, repo, *args, *(["data.batch_size=32"] if nproc == 2 else []), nproc=nproc))
    assert metrics["top1"] >= 0.85
    state = torch.load(repo / "output" / f"lazy{nproc}" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert state["config"]["model"]["name"] == "MyLazyNet" and state["model"]["head.weight"].shape == (10, 32)


def events(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_user_hook_runs_at_the_documented_points_and_its_state_survives_resume(server, repo):
    log = repo / "events.jsonl"
    args = [
        "experiment.name=hooked",
        f"hooks=[{{name: event_recorder, path: {log}}}]",
        "train.ema={decay: 0.9}",
        "data.batch_size=256",
    ]
    test_metrics(run_main(server, repo, *args, "train.epochs=2"))
    first = events(log)
    steps_per_epoch = 1257 // 256  # drop_last
    names = [e["event"] for e in first]
    epoch = ["before_epoch"] + ["after_step"] * steps_per_epoch + ["after_epoch", "after_validation"]
    assert names == ["before_train", *epoch, *epoch, "after_train", "after_test"]
    steps = [e for e in first if e["event"] == "after_step"]
    assert [e["step"] for e in steps] == list(range(1, 2 * steps_per_epoch + 1))
    assert all(e["ema_updates"] == e["step"] for e in steps)  # priority 50 runs after the EMA (20)
    ends = [e for e in first if e["event"] == "after_epoch"]
    # after_epoch runs before the epoch's checkpoint
    assert ends[0]["checkpoint"] is None and ends[1]["checkpoint"].endswith(f"epoch0000_batch{steps_per_epoch:06d}.pt")
    assert [e["metrics"] for e in first if e["event"] == "after_validation"][0] == [
        "ema_loss",
        "ema_samples",
        "ema_top1",
        "ema_top5",
        "loss",
        "samples",
        "top1",
        "top5",
    ]
    saved = torch.load(repo / "output" / "hooked" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert saved["hooks"]["event_recorder"] == {"steps": 2 * steps_per_epoch}

    log.unlink()
    finished = repo / "output" / "hooked" / "run_001"  # continued when named
    test_metrics(run_main(server, repo, *args, "train.epochs=3", "--resume", str(finished)))
    resumed = [e for e in events(log) if e["event"] == "after_step"]
    assert [e["steps_seen"] for e in resumed] == list(range(2 * steps_per_epoch + 1, 3 * steps_per_epoch + 1))


def test_a_bug_in_a_user_network_shows_its_traceback_and_exits_1(server, repo):
    proc = run_main(server, repo, "model.name=buggy_net", "model.args={num_classes: 10}", "experiment.name=buggy")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback (most recent call last)" in proc.stderr
    line = BUGGY_NET.splitlines().index('        width = self.cfg["widht"]  # the typo this test is about') + 1
    assert f'network/buggy_net.py", line {line}, in forward' in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.rstrip().endswith("KeyError: 'widht'")
    assert "error:" not in proc.stderr


def test_an_unknown_name_is_still_one_line_and_exit_2(server, repo):
    proc = run_main(server, repo, "model.name=bugy_net", "experiment.name=unknown")
    assert proc.returncode == 2
    assert [line for line in proc.stderr.splitlines() if line.startswith("error:")] == [
        proc.stderr.strip().splitlines()[-1]
    ]
    assert "unknown network 'bugy_net'" in proc.stderr and "did you mean 'buggy_net'" in proc.stderr
    assert "Traceback" not in proc.stderr
