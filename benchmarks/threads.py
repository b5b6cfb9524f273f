"""The quick start with its default CPU threads against ``threads=1``, on an idle machine and beside another torch job.

Usage: ``python benchmarks/threads.py [--rounds 2] [--iterations N] [--situations idle,busy]``

Each round runs ``python main.py`` (the quick start: digits, small_cnn) as a fresh process,
once per case, in rotating order:

- ``default``: the framework's default (``threads`` unset: ``utils/threads.py`` chooses);
- ``threads=1``: one intra-op thread, the figure to compare with;
- ``before``: the default before ``utils/threads.py``: torch imported before ``main.py``
  (so ``main.py`` cannot change OpenMP's wait policy) and ``threads`` = torch's own default.

in two situations: ``idle`` (nothing else started by this script) and ``busy`` (beside a
torch matmul loop in another process that uses torch's default threads and wait policy).
It prints the seconds of each run, the medians, the ratios ``default / threads=1`` and
``before / threads=1``, the thread count ``main.py`` logged, and the load average
(``os.getloadavg``) before and after each situation: on a shared machine the figures
are only as quiet as the machine. Goal: beside the busy job, ``default`` at most 1.5x
``threads=1``; idle, ``default`` no slower than ``before``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_S = 900
# a torch job as users run them: its default threads and OpenMP wait policy
BUSY_JOB = "import torch\na = torch.randn(1024, 1024)\nwhile True:\n    a @ a\n"
# the run as before utils/threads.py: OpenMP starts (with torch) before main.py could set its wait policy
BEFORE = (
    "import sys, runpy, torch\nsys.argv = ['main.py', *sys.argv[1:]]\nrunpy.run_path('main.py', run_name='__main__')\n"
)
OMP_KEYS = ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT", "MKL_NUM_THREADS")


def plain_env() -> Dict[str, str]:
    """This environment without the OpenMP settings a user might have made: the defaults are what is measured."""
    return {k: v for k, v in os.environ.items() if k not in OMP_KEYS}


def torch_default_threads() -> int:
    out = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env=plain_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip())


def run_once(case: str, out: Path, extra: List[str], old_threads: int) -> Tuple[float, str]:
    """Seconds of one quick start of ``case``, and the thread count its log names."""
    args = [f"experiment.output_root={out}", *extra]
    if case == "threads=1":
        cmd = [sys.executable, "main.py", *args, "threads=1"]
    elif case == "before":
        cmd = [sys.executable, "-c", BEFORE, *args, f"threads={old_threads}"]
    else:
        cmd = [sys.executable, "main.py", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=plain_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{case}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    found = re.search(r"(\d+) CPU threads?", proc.stderr)
    return seconds, found.group(1) if found else f"{old_threads} (threads={old_threads})" if case == "before" else "?"


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def situation(name: str, rounds: int, extra: List[str], old_threads: int) -> Dict[str, List[float]]:
    """Every case ``rounds`` times, rotating the order; the busy job runs for the whole situation when ``name`` is busy."""
    busy: Optional[subprocess.Popen] = None
    if name == "busy":
        busy = subprocess.Popen([sys.executable, "-c", BUSY_JOB], env=plain_env())
        time.sleep(5)  # its threads started and the load average moving
    cases = ["default", "threads=1", "before"]
    times: Dict[str, List[float]] = {case: [] for case in cases}
    print(f"\n[{name}] load average before: {load()}", flush=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(rounds):
                k = r % len(cases)
                for case in cases[k:] + cases[:k]:
                    seconds, threads = run_once(case, Path(tmp) / f"{case}_{r}", extra, old_threads)
                    times[case].append(seconds)
                    print(
                        f"  round {r + 1} {case:<10} {seconds:7.1f} s  ({threads} CPU threads; load {load()})",
                        flush=True,
                    )
    finally:
        if busy is not None:
            busy.terminate()
            busy.wait()
    print(f"[{name}] load average after: {load()}")
    return times


def report(name: str, times: Dict[str, List[float]]) -> None:
    med = {case: statistics.median(values) for case, values in times.items()}
    ratios = {case: [a / b for a, b in zip(times[case], times["threads=1"])] for case in ("default", "before")}
    print(f"[{name}] median s: " + ", ".join(f"{case} {value:.1f}" for case, value in med.items()))
    for case, values in ratios.items():
        print(
            f"[{name}] {case} / threads=1: {statistics.median(values):.2f} (per round: {', '.join(f'{v:.2f}' for v in values)})"
        )
    if name == "busy":
        print(
            f"[{name}] goal default / threads=1 <= 1.5: {'met' if statistics.median(ratios['default']) <= 1.5 else 'MISSED'}"
        )
    else:
        print(f"[{name}] default / before: {med['default'] / med['before']:.2f} (goal: <= 1, within noise)")


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--iterations", type=int, default=None, help="train.iterations (default: the whole quick start)"
    )
    parser.add_argument("--situations", default="idle,busy")
    args = parser.parse_args(argv)
    extra = [] if args.iterations is None else [f"train.iterations={args.iterations}"]
    old_threads = torch_default_threads()
    print(
        f"cores this process may use: {len(os.sched_getaffinity(0))}; torch's default threads: {old_threads}; python {sys.version.split()[0]}"
    )
    results = {name: situation(name, args.rounds, extra, old_threads) for name in args.situations.split(",")}
    print()
    for name, times in results.items():
        report(name, times)
    return 0


if __name__ == "__main__":
    sys.exit(main())
