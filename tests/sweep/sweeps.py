"""Running sweeps for the tests: a sweep file, the command, the runs it left."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Dict, List

import yaml

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON
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
    return subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=timeout)


def start(cmd: List[str]) -> subprocess.Popen:
    """The sweep in a process group of its own (a kill of the group is a node going down)."""
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finished(run_folder: Path) -> bool:
    return any(r["split"] == "test" for r in rows(run_folder))


def runs_by_tag(experiment: Path) -> Dict[str, List[Path]]:
    """``t000_lr=0.01_seed=1`` -> the run folders of that configuration and seed."""
    found: Dict[str, List[Path]] = {}
    for folder in sorted(experiment.glob("run_*_t*")):
        found.setdefault(folder.name.split("_", 2)[2], []).append(folder)
    return found
