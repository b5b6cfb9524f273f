"""Start-up: ``import main`` vs ``import torch``, each in a fresh process, interleaved.

``python main.py --help`` and a run that uses none of the optional heavy
modules (torchvision's model zoo, thop, scikit-learn, TensorBoard, DALI,
py_sod_metrics) should cost little more than PyTorch itself: those are
imported where they are used. The figure is the wall time of a fresh
interpreter that imports the module and exits.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, List

from benchmarks.common import interleaved, ratios, row

ROOT = Path(__file__).resolve().parents[1]


def _fresh(code: str) -> Callable[[], float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")

    def run() -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, capture_output=True)
        return time.perf_counter() - start

    return run


def run(quick: bool = False) -> List[dict]:
    rounds = 1 if quick else 7
    times = interleaved(
        {
            "torch": _fresh("import torch"),
            "main": _fresh("import main"),
            "help": _fresh("import main; main.main(['--help'])"),
        },
        rounds,
        warmup=not quick,  # quick: 3 processes, not 9
    )
    torch_s = sorted(times["torch"])[len(times["torch"]) // 2]
    return [
        row(
            "11 start-up",
            "import main / import torch (fresh processes)",
            ratios(times["main"], times["torch"]),
            "<= 1.3",
            lambda m: m <= 1.3,
            f"import torch alone {torch_s:.2f} s",
        ),
        row(
            "11 start-up",
            "main.py --help / import torch",
            ratios(times["help"], times["torch"]),
            "",
            None,
            "parse the arguments and print the help",
        ),
    ]
