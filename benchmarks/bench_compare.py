"""``--mode compare`` over 1,000 run folders against reading their 1,000 ``metrics.jsonl`` files with json.

The runs are generated, as training leaves them (no training): 200 configurations (40 learning rates x 5 widths)
x 5 seeds, each run with its resolved config.yaml and 15 validation rows and a test row; 1 in 50 runs has no
test row (incomplete). The framework's time is ``compare_command`` in this process (reading every config.yaml
and metrics.jsonl, grouping, statistics, compare.csv, compare.md and compare.png written), after one warm-up call
that imports scipy.stats; the baseline is the least any comparison does: every metrics.jsonl read and parsed.
Printed: the seconds of the comparison (goal < 2 s) and its ratio to the baseline, interleaved rounds; the full
run also times one whole ``python main.py --mode compare`` process (interpreter, torch and scipy imports included).
Standalone: ``python benchmarks/bench_compare.py [--runs N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.common import ratios, row  # noqa: E402
from tests.fixtures.compare_runs import resolved_config, write_run  # noqa: E402
from utils.compare.command import compare_command  # noqa: E402

SEEDS, WIDTHS = 5, ([8, 16], [16, 32], [32, 64], [8, 32], [16, 64])


def generate(experiment: Path, runs: int) -> None:
    """``runs`` run folders under ``experiment``: configurations of ``SEEDS`` seeds each, every 50th incomplete."""
    for number in range(runs):
        configuration, seed = divmod(number, SEEDS)
        lr, width = 10 ** (-4 + (configuration // len(WIDTHS)) / 10), WIDTHS[configuration % len(WIDTHS)]
        config = resolved_config(experiment, seed, optim__lr=lr, model__args__backbone_args={"widths": width})
        score = 0.9 - abs(configuration % 40 - 20) / 100 + seed / 1000
        val = [{"top1": score - 0.01 * (15 - epoch), "top5": 0.99, "loss": 1 - score} for epoch in range(15)]
        test = None if number % 50 == 49 else {"top1": score, "top5": 0.99, "loss": 1 - score}
        write_run(experiment / f"run_{number + 1:03d}", config, test, val)


def read_metrics(experiment: Path) -> float:
    """Seconds to read and parse every run's metrics.jsonl: the baseline."""
    start = time.perf_counter()
    for path in sorted(experiment.glob("run_*/metrics.jsonl")):
        with open(path) as handle:
            [json.loads(line) for line in handle]
    return time.perf_counter() - start


def compare(experiment: Path, output: Path) -> float:
    """Seconds of one ``--mode compare`` (in this process) into the new folder ``output``."""
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert compare_command([str(experiment)], str(output)) == 0
    return time.perf_counter() - start


def whole_process(experiment: Path, output: Path) -> float:
    """Seconds of ``python main.py --mode compare`` as a user runs it."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "--mode", "compare", str(experiment), "--output", str(output)],
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


def measure(runs: int, rounds: int, process: bool) -> Dict[str, List[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        experiment = base / "output" / "bench"
        generate(experiment, runs)
        compare(experiment, base / "warm")  # imports scipy.stats, as every process's first comparison does
        read_metrics(experiment)
        out: Dict[str, List[float]] = {"compare": [], "read": [], "process": []}
        for r in range(rounds):  # interleaved: a slow moment of a shared machine hits both alike
            cases = {
                "read": lambda: read_metrics(experiment),
                "compare": lambda r=r: compare(experiment, base / f"c{r}"),
            }
            for name in ("read", "compare") if r % 2 == 0 else ("compare", "read"):
                out[name].append(cases[name]())
        if process:
            out["process"].append(whole_process(experiment, base / "process"))
        return out


def run(quick: bool = False, runs: int = 1000, rounds: int = 5) -> List[dict]:
    if quick:
        runs, rounds = 200, 2
    out = measure(runs, rounds, process=not quick)
    shape = f"{runs} generated runs ({runs // SEEDS} configurations x {SEEDS} seeds, 16 metrics rows each), 1 thread"
    rows = [
        row(
            "17 compare",
            f"seconds of --mode compare over {runs} run folders (in process, csv, md and png written)",
            out["compare"],
            "< 2 s",
            lambda m: m < 2.0,
            shape,
        ),
        row(
            "17 compare",
            "--mode compare / reading the runs' metrics.jsonl with json",
            ratios(out["compare"], out["read"]),
            "",
            None,
            f"reading alone {statistics.median(out['read']):.3f} s",
            "{:.1f}",
        ),
    ]
    if out["process"]:
        rows.append(
            row(
                "17 compare",
                "seconds of the whole process: python main.py --mode compare (imports included)",
                out["process"],
                "",
                None,
                "torch alone takes about 1.4 s to import",
            )
        )
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for line in run(runs=args.runs, rounds=args.rounds):
        print(f"{line['measure']}: {line['value']} ({line['spread']}); goal {line['goal']}; {line['note']}")
