"""A 2-rank run resumed mid-epoch on 3 ranks vs on 2: seconds from the launch to the end of the first step.

The checkpoint comes from a 2-rank torchrun run on digits with
``data.global_batch_size=24``, SIGKILLed at batch 35 of its first epoch (its newest
checkpoint is at batch 30). Each round resumes a fresh copy of its folder with
``torchrun --nproc_per_node=3`` and with ``=2``. On 3 ranks the resume reads the
same checkpoint, skips the consumed global batches in the sampler (no sample is
loaded to be dropped) and draws new random streams; the figure is what the change
of world size costs on top of a plain resume. On this 2-core machine 3 processes
also share 2 cores, which the ratio includes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

from benchmarks.common import interleaved, ratios, row, scratch

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 300
SETTINGS = [
    "custom_imports=[tests.fixtures.recorded_digits,benchmarks.first_step]",
    "data.name=recorded_digits",
    "data.global_batch_size=24",
    "model.sync_bn=true",
    "data.prefetch=none",
    "train.epochs=2",
    "train.checkpoint_every_steps=10",
]


def _env(kill_at: int = 0) -> Dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", REGTRAIN_KILL_AT=str(kill_at))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    return env


def _torchrun(nproc: int, out: Path, *extra: str) -> List[str]:
    from tests.fixtures.dist_utils import torchrun

    return torchrun(nproc, f"experiment.output_root={out}", "experiment.name=run", *SETTINGS, *extra)


def _first_step(killed: Path, nproc: int, resume: bool = True) -> float:
    """Seconds from the launch to the end of the first step: of a resume of a copy of ``killed``, or of a fresh run."""
    out = Path(tempfile.mkdtemp(dir=killed.parent))
    if resume:
        shutil.copytree(killed, out, dirs_exist_ok=True, symlinks=True)
    start = time.time()
    args = ["--resume"] if resume else []
    proc = subprocess.run(
        _torchrun(nproc, out, *args, "hooks=[{name: first_step_clock}]"),
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    found = re.search(r"first step done at ([0-9.]+)", proc.stdout)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"the run on {nproc} ranks failed: {proc.stderr[-2000:]}")
    shutil.rmtree(out, ignore_errors=True)
    return float(found.group(1)) - start


def run(quick: bool = False) -> List[dict]:
    rounds = 1 if quick else 5
    tmp = scratch("bench_world_resume.")
    try:
        killed = tmp / "killed"
        # rank 0 SIGKILLs the job when it is about to read its sample 421 (batch 35 of epoch 0)
        subprocess.run(
            _torchrun(2, killed),
            cwd=ROOT,
            env=_env(kill_at=35 * 12 + 1),
            capture_output=True,
            timeout=TIMEOUT_S,
            start_new_session=True,
        )
        if not list((killed / "run" / "latest" / "checkpoints").glob("epoch0000_batch*.pt")):
            raise RuntimeError("the killed run left no mid-epoch checkpoint")
        cases = {
            "3": lambda: _first_step(killed, 3),
            "2": lambda: _first_step(killed, 2),
            "fresh3": lambda: _first_step(killed, 3, resume=False),
        }
        if quick:  # the resumes only: each case is a torchrun job of 3 or 4 process starts
            del cases["fresh3"]
        times = interleaved(cases, rounds, warmup=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    rows = [
        row(
            "13 resume on another world size",
            "launch to first step, 2-rank checkpoint resumed on 3 ranks / on 2 ranks",
            ratios(times["3"], times["2"]),
            "",
            None,
            f"digits, global batch 24, resumed at batch 30 of 52: {median(times['3']):.1f} s on 3 ranks, {median(times['2']):.1f} s on 2 (torchrun start-up included)",
        )
    ]
    if quick:
        return rows
    return [
        *rows,
        row(
            "13 resume on another world size",
            "launch to first step, that 3-rank resume / a fresh 3-rank run",
            ratios(times["3"], times["fresh3"]),
            "",
            None,
            f"a fresh 3-rank run: {median(times['fresh3']):.1f} s; the difference is reading the checkpoint and restoring the state",
        ),
    ]


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    for r in run(quick="--quick" in sys.argv):
        print(r)
