"""The time a sweep adds to its trials: ``--sweep`` of 2 configurations x 2 seeds against the same 4 runs started
one after the other alone (``python main.py`` with the same settings), whole processes, interleaved rounds; and
the seconds added per trial (the sweep's own start, Optuna and its storage, the checks of the space).

    python benchmarks/bench_sweep.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import interleaved, ratios, row  # noqa: E402

LRS, SEEDS = (0.003, 0.01), (0, 1)


def _timed(args: List[str]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "main.py", f"experiment.output_root={tmp}", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return seconds


def _alone(common: List[str], lrs: tuple, seeds: tuple) -> float:
    return sum(_timed([*common, f"optim.lr={lr}", f"seed={seed}"]) for lr in lrs for seed in seeds)


def run(quick: bool = False) -> List[dict]:
    # quick: one configuration and seed, one epoch, one round (each run is a process start)
    epochs, rounds, lrs, seeds = (1, 1, LRS[:1], SEEDS[:1]) if quick else (15, 3, LRS, SEEDS)
    with tempfile.TemporaryDirectory() as tmp:
        sweep = Path(tmp) / "four.yaml"
        sweep.write_text(f"space:\n  optim.lr: {{grid: {list(lrs)}}}\nseeds: {list(seeds)}\n")
        common = ["threads=1", f"train.epochs={epochs}"]
        times = interleaved(
            {"alone": lambda: _alone(common, lrs, seeds), "sweep": lambda: _timed(["--sweep", str(sweep), *common])},
            rounds,
            warmup=False,
        )
    runs = len(lrs) * len(seeds)
    added = [(s - a) / runs for s, a in zip(times["sweep"], times["alone"])]
    note = f"digits small_cnn, {epochs} epochs a run, {runs} runs; alone {statistics.median(times['alone']) / runs:.1f} s a run, the sweep adds {statistics.median(added):.2f} s a run"
    return [
        row(
            "18 sweep",
            f"{runs} runs in a sweep / the same {runs} alone",
            ratios(times["sweep"], times["alone"]),
            "<= 1.05",
            lambda v: v <= 1.05,
            note,
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 run of 1 epoch, 1 round")
    for r in run(parser.parse_args().quick):
        print(f"{r['measure']:<45} {r['value']:>7}  goal {r['goal']}  [{r['spread']}]  {r['note']}")


if __name__ == "__main__":
    main()
