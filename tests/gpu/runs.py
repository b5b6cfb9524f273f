"""Running main.py on the GPU for the CUDA tests: one process or a torchrun job, its output kept for the failure."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import List, NamedTuple

import pytest
import torch

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, free_port

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
TIMEOUT = 300


class Ran(NamedTuple):
    rc: int
    out: str

    def test_line(self) -> str:
        """The `test: k=v ...` line the run printed (the failure shows the whole output)."""
        found = re.findall(r"^test: .*$", self.out, re.M)
        assert self.rc == 0 and found, f"exit {self.rc}:\n{self.out[-6000:]}"
        return found[-1]


def launch(args: List[str], nproc: int = 0, timeout: float = TIMEOUT) -> Ran:
    """``python main.py ARGS`` (nproc 0) or ``torchrun --nproc_per_node=NPROC main.py ARGS``, on the GPU."""
    head = [PYTHON, "main.py"]
    if nproc:
        head = [PYTHON, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", f"--master_port={free_port()}"]
        head.append("main.py")
    env = subprocess_env()
    env["OMP_NUM_THREADS"] = "2"
    proc = subprocess.run(
        head + args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout
    )
    return Ran(proc.returncode, proc.stdout)


def digits(out: Path, name: str, *extra: str, epochs: int = 1, config: str = "") -> List[str]:
    """A short digits run on the GPU under ``out/name``, with ``config`` (a file in configs/) if named."""
    head = ["--config", f"configs/{config}"] if config else []
    return [
        *head,
        "device=cuda",
        f"experiment.output_root={out}",
        f"experiment.name={name}",
        f"train.epochs={epochs}",
        *extra,
    ]


def run_folder(out: Path, name: str) -> Path:
    return (out / name / "latest").resolve()
