"""One checkpoint point vs one bare ``torch.save``: the store writes the state once, into the file its rotation retires.

A checkpoint point that is also the best epoch writes ``epoch<E>_batch<B>.pt``
(hashed while written, fsynced, its ``.sha256``), links ``last.pt`` and
``best.pt`` to it and rotates. The baseline is one ``torch.save`` of the same
state to a file on the same disk, flushed and fsynced, overwritten in place each
time; a second baseline writes a new file each time and deletes the one before
last, as keeping two checkpoints does. The state is
resnet50-sized: about 100 MB of weights plus AdamW's two moments (about 300 MB).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any, Dict, List

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import interleaved, ratios, row, scratch, timed  # noqa: E402
from utils.checkpoint.store import CheckpointStore  # noqa: E402

BENCHMARK = "7 checkpoint write"


def resnet50_state() -> Dict[str, Any]:
    """The weights of torchvision's resnet50 and the AdamW state after one step (exp_avg, exp_avg_sq)."""
    from torchvision.models import resnet50

    torch.manual_seed(0)
    model = resnet50(weights=None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    optimizer.step()
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "progress": {"epoch": 1, "batch": 0, "step": 1},
    }


def bare_save(state: Dict[str, Any], path: Path) -> None:
    """What a hand-written loop does: one torch.save, flushed and fsynced."""
    with open(path, "wb") as fh:
        torch.save(state, fh)
        fh.flush()
        os.fsync(fh.fileno())


class FreshFiles:
    """``bare_save`` to a new file per call, deleting the one of two calls before: what any loop that
    keeps its last two checkpoints does, and what the store's files cost the file system."""

    def __init__(self, folder: Path, state: Dict[str, Any]) -> None:
        self.folder, self.state, self.count = folder, state, 0

    def __call__(self) -> None:
        self.count += 1
        bare_save(self.state, self.folder / f"fresh{self.count}.pt")
        (self.folder / f"fresh{self.count - 2}.pt").unlink(missing_ok=True)


class CheckpointPoints:
    """Successive best-epoch checkpoint points of one store (numbered file, last.pt, best.pt, rotation)."""

    def __init__(self, folder: Path, state: Dict[str, Any]) -> None:
        self.store = CheckpointStore(folder, keep=2)
        self.state = state
        self.epoch = 0

    def __call__(self) -> None:
        self.epoch += 1
        self.store.best = self.store.path_for(self.epoch, 0).name
        self.store.save(self.state, self.epoch, 0)


def run(quick: bool = False) -> List[dict]:
    rounds = 2 if quick else 7
    state = resnet50_state()
    megabytes = state_megabytes(state)
    folder = scratch("bench_checkpoint_write.")  # the disk checkpoints go to
    try:
        point = CheckpointPoints(folder / "checkpoints", state)
        bare = folder / "bare.pt"
        fresh = FreshFiles(folder, state)
        times = interleaved(
            {
                "store": lambda: timed(point),
                "bare": lambda: timed(lambda: bare_save(state, bare)),
                "fresh": lambda: timed(fresh),
            },
            rounds,
        )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    per_point = sorted(times["store"])[len(times["store"]) // 2]
    return [
        row(
            BENCHMARK,
            "seconds per best-epoch checkpoint point / one bare torch.save + fsync",
            ratios(times["store"], times["bare"]),
            "<= 1.15",
            lambda m: m <= 1.15,
            f"resnet50 + AdamW state, {megabytes:.0f} MB; one point: {per_point:.2f} s (numbered file hashed while written, .sha256, last.pt and best.pt hard links, rotation)",
        ),
        row(
            BENCHMARK,
            "seconds per best-epoch checkpoint point / bare torch.save + fsync to a new file, the one before last deleted",
            ratios(times["store"], times["fresh"]),
            "",
            None,
            "the same bytes as a new file per point: the file system frees and allocates blocks; the store overwrites the file its rotation retires",
        ),
    ]


def state_megabytes(state: Dict[str, Any]) -> float:
    return sum(t.numel() * t.element_size() for t in _tensors(state)) / 1e6


def _tensors(obj: Any) -> List[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in _tensors(v)]
    if isinstance(obj, (list, tuple)):
        return [t for v in obj for t in _tensors(v)]
    return []


if __name__ == "__main__":
    for r in run(quick="--quick" in sys.argv):
        print(r)
