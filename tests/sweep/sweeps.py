"""Running sweeps for the tests: a sweep file, the command, the runs it left."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, List

import yaml

from tests.conftest import ROOT, subprocess_env
from tests.fixtures import dist_utils
from tests.fixtures.dist_utils import PYTHON
from tests.fixtures.forked_main import ForkedRun, shared
from tests.fixtures.metrics_rows import rows

# a small CNN on digits, one thread, a checkpoint every 4 steps (22 steps an epoch)
FAST = [
    "model.args.backbone_args={widths: [8, 16]}",
    "threads=1",
    "data.prefetch=none",
    "train.checkpoint_every_steps=4",
    "train.keep_checkpoints=3",
]


def sweep_file(folder: Path, name: str, spec: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def command(sweep: Path, out: Path, *extra: str) -> List[str]:
    return [PYTHON, "main.py", "--sweep", str(sweep), f"experiment.output_root={out}", *FAST, *extra]


def run(cmd: List[str], timeout: float = 400) -> subprocess.CompletedProcess:
    """``cmd`` (``python main.py ...``) forked from the worker's main.py server; its trials are the processes the
    sweep starts itself."""
    return dist_utils.run(cmd, timeout)


def start(cmd: List[str]) -> ForkedRun:
    """The sweep (``python main.py ...``, forked) in a session of its own (a kill of the group is a node going
    down); ``output()`` is what it printed."""
    return shared(ROOT, subprocess_env()).start(cmd[2:], ROOT, subprocess_env(), timeout=120)


def finished(run_folder: Path) -> bool:
    return any(r["split"] == "test" for r in rows(run_folder))


def runs_by_tag(experiment: Path) -> Dict[str, List[Path]]:
    """``t000_lr=0.01_seed=1`` -> the run folders of that configuration and seed."""
    found: Dict[str, List[Path]] = {}
    for folder in sorted(experiment.glob("run_*_t*")):
        found.setdefault(folder.name.split("_", 2)[2], []).append(folder)
    return found
