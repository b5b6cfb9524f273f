"""Predict throughput: ``--mode predict`` over a folder of images vs a plain torch inference loop.

Both read the same PNG files with PIL and run the same network (the small CNN, widths
16 and 32, trained for one step on a generated digit folder enlarged to the same size) in batches of 64 on one process;
the plain loop is what a user writes by hand (load the checkpoint, build the network, read,
stack, forward, softmax, top-k). The images are digits 0-2 enlarged to ``--size`` pixels
(photo-like sizes: at 8x8 the run's fixed costs, config, run folder and CSV, are all there is
to time). Printed: images/s of each and their ratio (goal >= 0.95).
Standalone: ``python benchmarks/bench_predict.py [--images N] [--size S] [--rounds R]``.
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
from typing import Dict, List

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import main  # noqa: E402
from benchmarks.common import ratios, row  # noqa: E402
from tests.apps.conftest import CLASSES, folder_overrides, make_digit_folder  # noqa: E402
from utils.checkpoint.state import Checkpoint  # noqa: E402
from utils.commands.checkpoint_network import checkpoint_network  # noqa: E402
from utils.config.load import load_config  # noqa: E402


def plain_loop(checkpoint: Path, paths: list, batch: int = 64) -> float:
    """Seconds for a hand-written loop over ``paths``: PIL read, stack, forward, softmax, top-k."""
    from PIL import Image

    start = time.perf_counter()  # from the checkpoint file, as the framework's time is
    ckpt = Checkpoint.load(str(checkpoint))
    model, _ = checkpoint_network(load_config(base=ckpt.config), ckpt, torch.device("cpu"))
    model.eval()
    with torch.no_grad():
        for at in range(0, len(paths), batch):
            images = [
                torch.from_numpy(np.asarray(Image.open(p).convert("L"), dtype=np.float32) / 255.0)[None]
                for p in paths[at : at + batch]
            ]
            model(torch.stack(images)).softmax(dim=1).topk(3, dim=1)
    return time.perf_counter() - start


def enlarged_digits(folder: Path, images: int, size: int) -> List[Path]:
    """``images`` PNGs of digits 0-2 (cycled), enlarged to ``size`` x ``size``."""
    from PIL import Image

    from utils.data.datasets.digits import load_digits

    pixels, labels = load_digits()
    keep = [i for i in range(len(labels)) if labels[i] < len(CLASSES)]
    folder.mkdir(parents=True)
    for n in range(images):
        i = keep[n % len(keep)]
        Image.fromarray((pixels[i] * 15.9).astype(np.uint8), mode="L").resize((size, size), Image.BICUBIC).save(
            folder / f"{n:05d}.png"
        )
    return sorted(folder.glob("*.png"))


def enlarge(folder: Path, size: int) -> None:
    """Every PNG under ``folder`` enlarged in place to ``size`` x ``size``."""
    from PIL import Image

    for path in folder.rglob("*.png"):
        Image.open(path).resize((size, size), Image.BICUBIC).save(path)


def framework(checkpoint: Path, folder: Path, out: Path) -> float:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        assert (
            main.main(
                [
                    "--mode",
                    "predict",
                    "--checkpoint",
                    str(checkpoint),
                    "--input",
                    str(folder),
                    "--output",
                    str(out),
                    "data.eval_batch_size=64",
                    "threads=1",
                ]
            )
            == 0
        )
    return time.perf_counter() - start


def measure(images: int, size: int, rounds: int) -> Dict[str, List[float]]:
    """Per round: images/s of the framework and of the plain loop, interleaved (the order alternating)."""
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        data = make_digit_folder(base / "data", {"train": 30, "val": 6, "test": 2})
        enlarge(data, size)  # trained at the size it predicts: predict refuses inputs of another size
        with contextlib.redirect_stdout(io.StringIO()):
            assert (
                main.main(
                    [
                        *folder_overrides(base / "out", data),
                        f"model.input_size=[1, {size}, {size}]",
                        "train.iterations=1",
                        "model.args.backbone_args.widths=[16, 32]",
                    ]
                )
                == 0
            )
        checkpoint = base / "out" / "apps" / "run_001" / "checkpoints" / "best.pt"
        paths = enlarged_digits(base / "bench", images, size)
        framework(checkpoint, base / "bench", base / "warm")
        out: Dict[str, List[float]] = {"framework": [], "plain": []}
        for r in range(rounds):  # interleaved, so drifting machine load hits both alike
            timed = {
                "plain": lambda: plain_loop(checkpoint, paths),
                "framework": lambda r=r: framework(checkpoint, base / "bench", base / f"pred{r}"),
            }
            for name in ("plain", "framework") if r % 2 == 0 else ("framework", "plain"):
                out[name].append(len(paths) / timed[name]())
        return out


def run(quick: bool = False, images: int = 2000, size: int = 64, rounds: int = 5) -> List[dict]:
    if quick:
        images, rounds = 200, 2
    out = measure(images, size, rounds)
    return [
        row(
            "15 predict",
            "images/s --mode predict over a folder / hand-written inference loop",
            ratios(out["framework"], out["plain"]),
            ">= 0.95",
            lambda m: m >= 0.95,
            f"{images} {size}x{size} grey PNGs, small CNN, batch 64, 1 thread, whole runs from the checkpoint file; "
            f"plain loop {statistics.median(out['plain']):.0f} images/s",
        )
    ]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    for line in run(images=args.images, size=args.size, rounds=args.rounds):
        print(f"{line['measure']}: {line['value']} ({line['spread']}); goal {line['goal']}; {line['note']}")
