"""Host reads and collectives per training step, counted (not timed) in real ``main.py`` runs.

Each configuration runs twice, one epoch each, differing only in the number of
steps (``train.iterations``); the difference of the counts divided by the
difference of the steps is the per-step figure, so everything paid once per run
or per epoch (start-up, validation, the epoch's checkpoint, the test) cancels.
The steps differ by a multiple of ``train.log_every`` (10), so log steps are
counted at their true rate. ``data.batch_size=16`` (instead of 64) only gives
an epoch enough steps; everything else is the default experiment. Reads made
by evaluation are not counted (``utils/host_reads.py``). DDP's own gradient
all-reduce runs inside torch and is not a call from the project's files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from utils.distributed.spawned import free_port  # noqa: E402
from utils.host_reads import totals  # noqa: E402

SCRIPT = str(ROOT / "benchmarks" / "count_reads.py")
TIMEOUT_S = 300
BASE = ["data.batch_size=16", "train.epochs=1", "data.prefetch=none"]


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    return env


def count(tmp: Path, name: str, steps: int, ranks: int, extra: List[str]) -> Dict[str, int]:
    """Per-site counts of one run (rank 0's under torchrun, where rank 0 is the busiest)."""
    out = tmp / f"{name}_{steps}.json"
    args = [
        f"experiment.output_root={tmp}",
        f"experiment.name={name}_{steps}",
        f"train.iterations={steps}",
        "threads=1",
        *BASE,
        *extra,
    ]
    if ranks == 1:
        cmd = [sys.executable, SCRIPT, str(out), *args]
    else:
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={ranks}",
            "--master_addr=127.0.0.1",
            f"--master_port={free_port()}",
            SCRIPT,
            str(out),
            *args,
        ]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} ({steps} steps) failed: {proc.stderr[-2000:]}")
    path = out if ranks == 1 else Path(f"{out}.rank0")
    return json.loads(path.read_text())["sites"]


def per_step(
    tmp: Path, name: str, steps: Tuple[int, int], ranks: int, extra: List[str]
) -> Tuple[Dict[str, float], Dict[str, float]]:
    """({read, collective} per step, per-site counts per step) from two runs of ``steps`` steps."""
    short, long = (count(tmp, name, n, ranks, extra) for n in steps)
    span = steps[1] - steps[0]
    sites = {site: (long.get(site, 0) - short.get(site, 0)) / span for site in set(short) | set(long)}
    sites = {site: n for site, n in sites.items() if n}
    kinds = totals(long)
    base = totals(short)
    return {k: (kinds[k] - base[k]) / span for k in kinds}, sites


CASES = [
    ("O0, 1 process", 1, []),
    ("O1 bf16, 1 process", 1, ["amp.opt_level=O1"]),
    ("O0, 2-rank DDP", 2, []),
    ("O1 bf16, 2-rank DDP", 2, ["amp.opt_level=O1"]),
]


# a quick run: one process plain, two ranks with bf16 autocast (each other case is a process start or three)
QUICK_CASES = [CASES[0], CASES[3]]


def run(quick: bool = False) -> List[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, ranks, extra in QUICK_CASES if quick else CASES:
            # 1257 training images: 78 steps of 16 in one process, 39 per rank with 2
            steps = (10, 20) if quick else ((10, 70) if ranks == 1 else (5, 35))
            name = label.split(",")[0].replace(" ", "_") + f"_{ranks}"
            kinds, sites = per_step(Path(tmp), name, steps, ranks, extra)
            for kind, measure in (
                ("read", "host reads per training step"),
                ("collective", "collectives per training step"),
            ):
                mine = sorted(
                    ((site.split(" ", 1)[1], n) for site, n in sites.items() if site.startswith(kind)),
                    key=lambda kv: -kv[1],
                )
                where = ", ".join(f"{site} {n:.2f}" for site, n in mine[:4]) or "none"
                rows.append(_row(label, measure, kinds[kind], f"steps {steps[0]} vs {steps[1]}; per step: {where}"))
    return rows


def _row(label: str, measure: str, value: float, note: str) -> dict:
    return {
        "benchmark": "8 host reads",
        "measure": f"{measure}, {label}",
        "value": f"{value:.3f}",
        "goal": "<= 0.1",
        "ok": value <= 0.1,
        "note": note,
    }
