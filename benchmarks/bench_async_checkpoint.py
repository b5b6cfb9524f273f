"""How long a checkpoint point blocks the training thread: ``train.async_checkpoint`` vs a synchronous write.

Both go through the checkpointer's own ``write`` (rank 0's part of a checkpoint
point) on a resnet50-sized state (weights plus AdamW's moments, about 300 MB) in a
checkpoint folder on the output disk. Synchronous: the checkpointer serializes, hashes,
fsyncs, renames, links and rotates before it returns. Background: it copies the
state to CPU memory and returns; the writer thread does the rest. Between two
points training runs longer than one write (as at any sensible checkpoint
interval), so the write in flight has ended before the next point: the benchmark
waits for it outside the timed region and reports that time too.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_checkpoint_write import resnet50_state, state_megabytes  # noqa: E402
from benchmarks.common import interleaved, ratios, row, scratch, timed  # noqa: E402
from utils.checkpoint.state import Progress, RunRecord  # noqa: E402
from utils.checkpoint.store import CheckpointStore  # noqa: E402
from utils.distributed.process_group import DistInfo  # noqa: E402
from utils.engine.checkpointer import Checkpointer, Contents  # noqa: E402

BENCHMARK = "12 background checkpoint"


class Points:
    """Successive checkpoint points of one checkpointer; ``background`` as ``train.async_checkpoint``."""

    def __init__(self, folder: Path, state: Dict, background: bool) -> None:
        # write() takes a ready snapshot
        unused = Contents(objects=lambda: None, run=RunRecord(), dist=DistInfo(), sync=lambda: None)
        self.checkpointer = Checkpointer(CheckpointStore(folder, keep=2), unused, background=background)
        self.state, self.epoch = state, 0
        self.write_s: List[float] = []  # the background thread's time, waited for outside the timed region

    def __call__(self) -> float:
        self.epoch += 1
        blocked = timed(lambda: self.checkpointer.write(self.state, Progress(self.epoch, 0, self.epoch)))
        self.write_s.append(blocked + timed(self.checkpointer.wait))
        return blocked


def run(quick: bool = False) -> List[dict]:
    rounds = 2 if quick else 7
    state = resnet50_state()
    folder = scratch("bench_async_checkpoint.")
    try:
        sync, background = Points(folder / "sync", state, False), Points(folder / "async", state, True)
        times = interleaved({"sync": sync, "async": background}, rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    median = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    return [
        row(
            BENCHMARK,
            "training-thread seconds per checkpoint point, async / sync",
            ratios(times["async"], times["sync"]),
            "<= 0.25",
            lambda m: m <= 0.25,
            f"resnet50 + AdamW state, {state_megabytes(state):.0f} MB: blocks {median(times['async']):.2f} s (CPU copy) vs {median(times['sync']):.2f} s; "
            f"the background write then takes {median(background.write_s):.2f} s",
        ),
    ]


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r)
