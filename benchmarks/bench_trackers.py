"""The MLflow tracker's cost: the marginal epoch of the default experiment with ``hooks=[{name: mlflow}]`` against
without (goal <= 1.03x), and the time a log step blocks the training loop to hand its values to the tracker
(goal <= 1 ms), against a real ``mlflow server`` on this machine.

The marginal epoch is (wall time of an E2-epoch run - that of an E1-epoch run) / (E2 - E1), whole processes, so the
start (imports, the tracker run's creation) is left out; the cases are interleaved. The blocking time is that of the
hook's handler for one log step's scalars (the spool's line written, the replay check) while the sender thread
sends to the server, median over many calls.

``python benchmarks/bench_trackers.py [--quick]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import interleaved, ratios, row, scratch  # noqa: E402
from tests.fixtures.mlflow_server import MlflowServer, mlflow_command  # noqa: E402

TITLE = "25 trackers"


CPU: Dict[str, List[float]] = {}  # each case's CPU seconds (the process and its threads), beside its wall time


def main_run(out: Path, epochs: int, hook: List[str], case: str) -> float:
    cmd = [sys.executable, "main.py", f"experiment.output_root={out}", f"train.epochs={epochs}", "threads=1", *hook]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU.setdefault(case, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return wall


def blocking_ms(uri: str, folder: Path, calls: int) -> List[float]:
    """Milliseconds per log step's handler call, while the sender sends (medians of 5 slices)."""
    from utils.trackers.hooks import MlflowTracker
    from utils.trackers.mlflow_backend import MlflowBackend
    from utils.trackers.sender import Sender
    from utils.trackers.spool import Spool

    hook = MlflowTracker(tracking_uri=uri)
    hook.spool = Spool(folder / "trackers", "mlflow")
    hook.spool.save_identity(folder_id=folder.name)
    hook.sender = Sender(hook.spool, MlflowBackend(uri, "bench", "bench/run")).start()
    times = []
    for step in range(1, calls + 1):
        start = time.perf_counter()
        hook._on_scalars(step, "train", {"loss": 1.0 / step, "lr": 0.1})
        times.append((time.perf_counter() - start) * 1000)
        time.sleep(0.001)  # a step's work between log steps
    hook.spool.close()
    hook.sender.close(30, folder)
    slice_ = len(times) // 5
    return [statistics.median(times[i * slice_ : (i + 1) * slice_]) for i in range(5)]


def run(quick: bool = False) -> List[dict]:
    if mlflow_command() is None:
        return [row(TITLE, "skipped: mlflow is not installed (pip install -e '.[mlflow]')", [])]
    e1, e2, rounds = (1, 2, 1) if quick else (1, 11, 5)
    out = scratch("bench_trackers.")
    with MlflowServer(Path(tempfile.mkdtemp(prefix="mlflow.", dir=out))) as server:
        hooked = [f"hooks=[{{name: mlflow, tracking_uri: '{server.uri}'}}]"]
        cases = {
            f"{name}/{epochs}": (
                lambda epochs=epochs, hook=hook, name=name: main_run(out, epochs, hook, f"{name}/{epochs}")
            )
            for name, hook in (("plain", []), ("mlflow", hooked))
            for epochs in (e1, e2)
        }
        times: Dict[str, List[float]] = interleaved(cases, rounds, warmup=not quick)
        cpu = {case: values[-rounds:] for case, values in CPU.items()}  # the warm-up's left out
        marginal, marginal_cpu = (
            {
                name: [(b - a) / (e2 - e1) for a, b in zip(figures[f"{name}/{e1}"], figures[f"{name}/{e2}"])]
                for name in ("plain", "mlflow")
            }
            for figures in (times, cpu)
        )
        blocked = blocking_ms(server.uri, out / "blocking", 200 if quick else 2000)
    return [
        row(
            TITLE,
            "marginal epoch with the MLflow hook / without",
            ratios(marginal["mlflow"], marginal["plain"]),
            "<= 1.03",
            lambda v: v <= 1.03,
            f"default experiment, threads=1, runs of {e1} and {e2} epochs, a server on this machine",
        ),
        row(
            TITLE,
            "marginal epoch's CPU with the MLflow hook / without",
            ratios(marginal_cpu["mlflow"], marginal_cpu["plain"]),
            note="CPU seconds of the run's process, its sender thread included: what a shared machine's load barely moves",
        ),
        row(TITLE, "marginal epoch without (s)", marginal["plain"], fmt="{:.3f}"),
        row(TITLE, "marginal epoch with the MLflow hook (s)", marginal["mlflow"], fmt="{:.3f}"),
        row(
            TITLE,
            "blocking time per log step (ms)",
            blocked,
            "<= 1",
            lambda v: v <= 1.0,
            "the hook's handler: the spool's line written while the sender sends",
            fmt="{:.4f}",
        ),
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    for result in run(parser.parse_args().quick):
        print(f"{result['measure']}: {result['value']}  [{result['spread']}] {result['goal']} {result['ok']}")
