"""Predict throughput: ``--mode predict`` over a folder of images vs a plain torch inference loop.

Both read the same PNG files with PIL and run the same network (a checkpoint trained for
one step on a generated digit folder) in batches of 64 on one process; the plain loop
is what a user writes by hand (read, stack, forward, softmax, top-k). Printed: images/s of
each and their ratio (goal >= 0.95). Standalone: ``python benchmarks/bench_predict.py [--images N (at most 490: digits 0-2)] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import main  # noqa: E402
from tests.apps.conftest import folder_overrides, make_digit_folder  # noqa: E402
from utils.checkpoint.state import Checkpoint  # noqa: E402
from utils.config import load_config  # noqa: E402
from utils.engine.test_mode import checkpoint_network  # noqa: E402


def plain_loop(checkpoint: Path, paths: list, batch: int = 64) -> float:
    """Seconds for a hand-written loop over ``paths``: PIL read, stack, forward, softmax, top-k."""
    from PIL import Image

    start = time.perf_counter()  # from the checkpoint file, as the framework's time is
    ckpt = Checkpoint.load(str(checkpoint))
    model, _ = checkpoint_network(load_config(base=ckpt.config), ckpt, torch.device("cpu"))
    model.eval()
    with torch.no_grad():
        for at in range(0, len(paths), batch):
            images = [torch.from_numpy(np.asarray(Image.open(p).convert("L"), dtype=np.float32) / 255.0)[None] for p in paths[at : at + batch]]
            model(torch.stack(images)).softmax(dim=1).topk(3, dim=1)
    return time.perf_counter() - start


def framework(checkpoint: Path, folder: Path, out: Path) -> float:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert main.main(["--mode", "predict", "--checkpoint", str(checkpoint), "--input", str(folder), "--output", str(out), "data.eval_batch_size=64", "threads=1"]) == 0
    return time.perf_counter() - start


def run(images: int, rounds: int) -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        data = make_digit_folder(base / "data", {"train": 30, "val": 6, "test": 2, "bench": images})
        with contextlib.redirect_stdout(io.StringIO()):
            assert main.main([*folder_overrides(base / "out", data), "train.iterations=1"]) == 0
        checkpoint = base / "out" / "apps" / "run_001" / "checkpoints" / "best.pt"
        paths = sorted((data / "bench").rglob("*.png"))
        ratios, ours, plain = [], [], []
        for r in range(rounds):  # interleaved, so drifting machine load hits both alike
            p = plain_loop(checkpoint, paths)
            f = framework(checkpoint, data / "bench", base / f"pred{r}")
            ours.append(len(paths) / f)
            plain.append(len(paths) / p)
            ratios.append(p / f)
        print(f"predict {images} images: framework {statistics.median(ours):.0f} images/s, plain loop {statistics.median(plain):.0f} images/s, "
              f"ratio {statistics.median(ratios):.3f} ({min(ratios):.3f} .. {max(ratios):.3f}, n={rounds}); goal >= 0.95")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=480)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run(args.images, args.rounds)
