"""Packed shards (``data.name=shards``) through the framework's train loader: local, and from S3.

The generated JPEGs of ``bench_image_folder.py`` (about 500x375, 10 classes) are packed in
process by ``utils/commands/pack.py``'s ``pack`` with 4 MB shards (several shards), into a
folder and into a bucket of a SeaweedFS S3 server on free loopback ports. The server is
started and stopped by ``tests/fixtures/seaweed.py`` (``start_server``), the helper the shard
tests' conftest uses too; this script imports ``tests.fixtures.seaweed`` (the tests never
import ``benchmarks``). Without the ``weed`` binary or boto3 the S3 rows are left out.

Every loader is the train loader as ``main.py`` builds it (``load_config`` ->
``with_process_batch`` -> ``build_dataset`` -> ``build_train_loader``): RandomResizedCrop 224
+ flip, normalize, batch 64, 2 workers, one epoch per case and round, interleaved with
the other cases (``benchmarks/common.py``); every ratio is of two figures of the same round.

1. images/s: local shards / ``image_folder`` on the same JPEGs (goal >= 1.0);
2. S3 with a warm cache / local shards (goal >= 0.95), and S3 with a cold cache (its cache
   folder emptied before each round, so each epoch downloads every shard) / local (>= 0.8);
3. local shards and S3 (warm) / the decode limit: single-core decode rate (PIL open +
   convert RGB, as ``bench_image_folder`` measures it) x 2 workers (goal >= 0.8);
4. resume at an epoch's end / at its start: the seconds from ``epoch_batches(loader, epoch,
   skip)`` (what the trainer calls each epoch: ``set_epoch``, then ``skip_first(skip x batch)``
   on a resume) to the first batch, for skip = 0 and skip = batches per epoch - 1, on local
   shards (goal <= 1.1). That is the part of a resume that depends on where in the epoch it
   stops; a whole ``main.py`` resume adds the same process start and checkpoint load to both
   and would bury the difference in their noise, at ten times the cost.

``python benchmarks/bench_shards.py [--quick] [--images N] [--rounds R]``
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


from benchmarks.bench_image_folder import BATCH, WORKERS, decode_rate, framework_loader, images_per_s, make_jpegs  # noqa: E402
from benchmarks.common import interleaved, loader_bench_main, ratios, row  # noqa: E402

TITLE = "20 shards"
SHARD_SIZE = "4MB"


def train_loader(name: str, root: str, args: str = "{}"):
    """The train loader as ``main.py`` builds it for these overrides (bench_image_folder's)."""
    return framework_loader(root, name, args)


def pack_into(jpegs: Path, output: str) -> dict:
    """``--mode pack`` in process: the image_folder at ``jpegs`` as 4 MB shards at ``output``."""
    from utils.commands.pack import pack
    from utils.config.load import load_config

    logging.getLogger("utils.commands.pack").setLevel(logging.ERROR)  # no val or test folder: its warnings
    cfg = load_config(overrides=["data.name=image_folder", f"data.root={jpegs}"])
    return pack(cfg, output, SHARD_SIZE)["train"]


def emptied_first(folder: Path, epoch: Callable[[], float]) -> Callable[[], float]:
    """``epoch`` after emptying the cache ``folder``: every shard is downloaded again."""

    def once() -> float:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        return epoch()

    return once


def first_batch_s(loader, skip: int) -> Callable[[], float]:
    """Seconds from ``epoch_batches(loader, epoch, skip)`` (as the trainer starts an epoch) to its first batch."""
    from utils.engine.epoch_batches import close_batches, epoch_batches

    epochs = [0]

    def once() -> float:
        epochs[0] += 1
        start = time.perf_counter()
        batches = epoch_batches(loader, epochs[0], skip)
        next(batches)
        seconds = time.perf_counter() - start
        close_batches(batches)
        return seconds

    return once


def s3_server(folder: Path):
    """A started SeaweedFS (``tests/fixtures/seaweed.py``), or None without ``weed`` or boto3."""
    weed = shutil.which("weed")
    try:
        import boto3  # noqa: F401
    except ImportError:
        return None
    if weed is None:
        return None
    from tests.fixtures.seaweed import start_server

    return start_server(folder, weed)


def run(quick: bool = False, images: int = 0, rounds: int = 0) -> List[dict]:
    images = images or (256 if quick else 1280)
    rounds = rounds or (1 if quick else 5)
    jpegs = make_jpegs(images)
    rows: List[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-shards-") as tmp:
        work = Path(tmp)
        packed = pack_into(jpegs, str(work / "local"))
        server = s3_server(work / "seaweedfs")
        saved = dict(os.environ)
        try:
            cases: Dict[str, Callable[[], float]] = {}
            epochs_cpu: Dict[str, List[float]] = {}
            for name, loader in (
                ("image_folder", train_loader("image_folder", str(jpegs))),
                ("local", train_loader("shards", str(work / "local"))),
            ):
                epochs_cpu[name] = []
                cases[name] = images_per_s(loader, epochs_cpu[name])
            warm_dir, cold_dir = work / "cache-warm", work / "cache-cold"
            if server is not None:
                os.environ.update(server.env())
                bucket = server.bucket()
                url = f"s3://{bucket}/jpegs"
                pack_into(jpegs, url)
                for name, folder in (("s3_warm", warm_dir), ("s3_cold", cold_dir)):
                    epochs_cpu[name] = []
                    loader = train_loader("shards", url, f"{{cache_dir: {folder}}}")
                    cases[name] = images_per_s(loader, epochs_cpu[name])
                cases["s3_cold"] = emptied_first(cold_dir, cases["s3_cold"])
                if quick:  # no warm-up round: fill the warm cache with one untimed epoch
                    cases["s3_warm"]()
            cases["decode"] = decode_rate(jpegs, min(images, 320))
            load = os.getloadavg()[0]
            rates = interleaved(cases, rounds, warmup=not quick)
            resume_loader = train_loader("shards", str(work / "local"))
            last = len(resume_loader) - 1
            resume = interleaved(
                {"start": first_batch_s(resume_loader, 0), "end": first_batch_s(resume_loader, last)},
                max(2 * rounds, 3),
                warmup=not quick,
            )
            load = f"load {load:.2f} -> {os.getloadavg()[0]:.2f}"
        finally:
            os.environ.clear()
            os.environ.update(saved)
            if server is not None:
                server.stop()
    for r in range(rounds):
        parts = [f"{name} {rates[name][r]:.0f}" for name in rates]
        print(f"round {r}: images/s {', '.join(parts)} (decode: per core)")
    print(f"first batch s, start: {resume['start']}, end: {resume['end']}")
    note = (
        f"{images} JPEGs, {packed['shards']} shards of {SHARD_SIZE} ({packed['bytes'] / 1e6:.0f} MB), batch {BATCH}, "
        f"{WORKERS} workers, {os.cpu_count()} cores, {load}"
    )
    limit = [d * min(WORKERS, os.cpu_count() or 1) for d in rates["decode"]]
    rows.append(
        row(
            TITLE,
            "local shards / image_folder (images/s)",
            ratios(rates["local"], rates["image_folder"]),
            ">= 1.0",
            lambda m: m >= 1.0,
            note,
        )
    )
    if "s3_warm" in rates:
        rows.append(
            row(
                TITLE,
                "S3, warm cache / local shards",
                ratios(rates["s3_warm"], rates["local"]),
                ">= 0.95",
                lambda m: m >= 0.95,
                "SeaweedFS on loopback",
            )
        )
        rows.append(
            row(
                TITLE,
                "S3, cold cache / local shards",
                ratios(rates["s3_cold"], rates["local"]),
                ">= 0.8",
                lambda m: m >= 0.8,
                "cache folder emptied before each round",
            )
        )
    else:
        print("S3 rows left out: the weed binary or boto3 is missing")
    rows.append(
        row(
            TITLE,
            "local shards / decode limit",
            ratios(rates["local"], limit),
            ">= 0.8",
            lambda m: m >= 0.8,
            "decode limit: single-core PIL open + convert RGB x workers",
        )
    )
    if "s3_warm" in rates:
        rows.append(row(TITLE, "S3 warm / decode limit", ratios(rates["s3_warm"], limit), ">= 0.8", lambda m: m >= 0.8))
    rows.append(
        row(
            TITLE,
            "first batch after resume at epoch end / at start",
            ratios(resume["end"], resume["start"]),
            "<= 1.1",
            lambda m: m <= 1.1,
            f"epoch_batches(skip={last}) vs skip=0 to the first batch, local shards; "
            f"start {min(resume['start']):.2f} .. {max(resume['start']):.2f} s",
        )
    )
    for name in rates:
        unit = "single-core decode images/s" if name == "decode" else f"{name} images/s"
        rows.append(row(TITLE, unit, rates[name], fmt="{:.0f}"))
    skip = 0 if quick else 1  # the warm-up epoch
    for name, values in epochs_cpu.items():
        rows.append(
            row(TITLE, f"{name} CPU ms per image", values[skip + (name == "s3_warm" and quick) :], fmt="{:.2f}")
        )
    return rows


def main(argv: Optional[List[str]] = None) -> None:
    loader_bench_main(__doc__, run, argv)


if __name__ == "__main__":
    main()
