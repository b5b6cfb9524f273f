"""Packed data at scale: what the compact index costs as the sample count grows (10 thousand against 1 million).

Tiny PNGs (8x8 grey, 10 classes, a few hundred in val and test) are written as an image folder at each size,
packed with ``--mode pack`` (``--workers 1`` and the default, the usable cores), and read back as
``data.name=image_folder data.root=<the pack>``. Every figure comes from a process of its own, so one
figure's memory never counts in another's:

1. packing: images/s with the default workers / with ``--workers 1`` (goal >= 1.6 on 2 cores), and the packing
   process's peak RSS at the large size against the small (goal <= small + 200 MB);
2. start-up: CPU seconds (user + system) of ``main.py`` training one step from the pack and testing, at the
   large size / the small (goal <= 1.3): the index is mapped and checked whole, nothing per sample is built;
3. memory: the main process's anonymous memory with the train loader built and a batch read (goal <= small +
   150 MB), and each loader worker's private dirty memory (copied-on-write pages and its own allocations,
   ``/proc/<pid>/smaps_rollup``) after reading 5,000 samples (goal <= small + 32 MB) and after a whole epoch
   (goal <= small + 64 MB);
4. a node of 8 ranks x 8 loader workers, projected from the measured per-process figures: 8 main processes'
   anonymous memory + 64 workers' private memory (the index's pages are shared through the page cache, once).

``python benchmarks/bench_index_scale.py [--quick] [--sizes 10000,1000000] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Sequence

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.common import row  # noqa: E402

TITLE = "23 index at scale"
CLASSES, EVAL_SAMPLES, FIRST = 10, 200, 5000
CORES = str(len(os.sched_getaffinity(0)))  # --mode pack's default --workers
CHILD_ENV = {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def make_pngs(root: Path, n: int) -> Path:
    """``n`` training PNGs (and ``EVAL_SAMPLES`` in val and test) under ``root``, made once (a marker says so)."""
    done = root / f".made-{n}"
    if done.is_file():
        return root
    from PIL import Image

    shutil.rmtree(root, ignore_errors=True)
    pictures = []
    for k in range(CLASSES):  # one picture per class: what is read does not matter here, how many does
        buffer = io.BytesIO()
        Image.new("L", (8, 8), color=k * 25).save(buffer, format="PNG")
        pictures.append(buffer.getvalue())
    for split, count in (("train", n), ("val", EVAL_SAMPLES), ("test", EVAL_SAMPLES)):
        for k in range(CLASSES):
            (root / split / f"c{k}").mkdir(parents=True)
        for i in range(count):
            (root / split / f"c{i % CLASSES}" / f"{i:08d}.png").write_bytes(pictures[i % CLASSES])
    done.touch()
    return root


def child(*args: str) -> Dict[str, float]:
    """This script's ``--child`` measurement in a process of its own; the JSON line it prints."""
    env = {**os.environ, **CHILD_ENV}
    out = subprocess.run(
        [sys.executable, __file__, "--child", *args], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _rusage() -> Dict[str, float]:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "cpu_s": own.ru_utime + own.ru_stime,
        "peak_mb": own.ru_maxrss / 1024,
        "children_peak_mb": kids.ru_maxrss / 1024,
    }


def measure_pack(data: str, output: str, workers: str) -> Dict[str, float]:
    import main

    start = time.perf_counter()
    args = ["--mode", "pack", "--output", output, "data.name=image_folder", f"data.root={data}", "--workers", workers]
    assert main.main(args) == 0
    return {"seconds": time.perf_counter() - start, **_rusage()}


def measure_startup(pack: str, out: str) -> Dict[str, float]:
    import main

    args = [f"data.root={pack}", "data.name=image_folder", "data.args={channels: 1}", "model.input_size=[1, 8, 8]"]
    args += ["train.iterations=1", "data.num_workers=0", f"experiment.output_root={out}", "threads=1"]
    assert main.main(args) == 0
    return _rusage()


def _private_dirty_mb(pid: int) -> float:
    text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    return sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("Private_Dirty:")) / 1024


def _anon_mb() -> float:
    line = next(line for line in Path("/proc/self/status").read_text().splitlines() if line.startswith("RssAnon:"))
    return int(line.split()[1]) / 1024


def measure_memory(pack: str) -> Dict[str, float]:
    """The train loader as main.py builds it over the pack (2 workers): memory after a batch, 5,000 samples, an epoch."""
    import torch

    from utils.config.load import load_config
    from utils.data import build_dataset, build_train_loader

    torch.set_num_threads(1)
    cfg = load_config(
        None, [f"data.root={pack}", "data.name=image_folder", "data.args={channels: 1}", "data.num_workers=2"]
    )
    dataset = build_dataset(cfg.data, "train")
    loader = build_train_loader(dataset, cfg.data, rank=0, world_size=1, seed=0)
    iterator = iter(loader)
    seen, found, workers, batch = 0, {}, [], 0
    for batch, (inputs, _) in enumerate(iterator):
        seen += inputs.shape[0]
        if not workers:
            workers = [w.pid for w in getattr(iterator, "_workers", [])] or _worker_pids()
            found["main_anon_mb"] = _anon_mb()
        if seen >= FIRST and "worker_first_mb" not in found:
            found["worker_first_mb"] = _workers_mb(workers)
        if batch % 20 == 0:  # the workers end with the epoch: the last reading before its end is the epoch's
            found["worker_epoch_mb"] = _workers_mb(workers) or found.get("worker_epoch_mb", 0.0)
    found.setdefault("worker_first_mb", found.get("worker_epoch_mb", 0.0))  # an epoch shorter than FIRST samples
    found["samples"] = seen
    return found


def _workers_mb(pids: List[int]) -> float:
    """The largest private dirty memory of the ``pids`` still running (0 when none is)."""
    sizes = []
    for pid in pids:
        try:
            sizes.append(_private_dirty_mb(pid))
        except (FileNotFoundError, ProcessLookupError):
            continue
    return max(sizes, default=0.0)


def _worker_pids() -> List[int]:
    """This process's children (the loader's workers, when the framework's loader wraps the iterator)."""
    me = os.getpid()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().split(") ")[1].split()[1]) == me:
                    pids.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return pids


def run_size(n: int, work: Path, rounds: int, one_worker: bool = True) -> Dict[str, Dict[str, float]]:
    """Every figure at ``n`` samples; the packs in ``rounds`` interleaved rounds (a disk's pace varies), each
    pack's figures the median of its rounds. Without ``one_worker`` only the default workers pack (the rows read
    the ``--workers 1`` pack's rate at the large size only)."""
    data = make_pngs(work / f"png-{n}", n)
    runs: Dict[str, List[Dict[str, float]]] = {}
    for r in range(rounds):
        order = ("1", CORES) if r % 2 == 0 else (CORES, "1")
        for workers in order if one_worker else (CORES,):
            output = work / f"pack-{n}-{workers}"
            shutil.rmtree(output, ignore_errors=True)
            runs.setdefault(workers, []).append(child("pack", str(data), str(output), workers))
    found = {f"pack_{w}": {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in runs.items()}
    found["pack_rounds"] = {w: [n / r["seconds"] for r in rs] for w, rs in runs.items()}  # type: ignore[dict-item]
    pack = str(work / f"pack-{n}-{'1' if one_worker else CORES}")
    found["startup"] = child("startup", pack, str(work / f"out-{n}"))
    found["memory"] = child("memory", pack)
    return found


def run(quick: bool = False, sizes: Sequence[int] = (), keep: str = "", rounds: int = 0) -> List[dict]:
    small, large = sizes or ((1_000, 4_000) if quick else (10_000, 1_000_000))
    rounds = rounds or (1 if quick else 2)
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="index-scale-"))
    try:
        # a quick run packs the small size once, with the default workers: one process start fewer
        found = {n: run_size(n, work, 1 if n == small else rounds, not quick or n == large) for n in (small, large)}
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    cores, (a, b) = CORES, (found[small], found[large])
    rate = found[large]["pack_rounds"]
    note = f"{small:,} and {large:,} tiny PNGs, {cores} cores, load {os.getloadavg()[0]:.2f}"
    node = 8 * b["memory"]["main_anon_mb"] + 64 * b["memory"]["worker_epoch_mb"]
    rows = [
        row(TITLE, f"pack images/s, {cores} workers / 1, at {large:,}", [x / y for x, y in zip(rate[cores], rate["1"])], ">= 1.6", lambda m: m >= 1.6, note),
        row(TITLE, f"pack images/s at {large:,}, 1 worker", rate["1"], fmt="{:.0f}"),
        row(TITLE, f"pack images/s at {large:,}, {cores} workers", rate[cores], fmt="{:.0f}"),
        row(TITLE, f"pack peak RSS MB, {large:,} - {small:,}", [b[f"pack_{cores}"]["peak_mb"] - a[f"pack_{cores}"]["peak_mb"]], "<= 200", lambda m: m <= 200, f"at {small:,}: {a[f'pack_{cores}']['peak_mb']:.0f} MB; writers' peak at {large:,}: {b[f'pack_{cores}']['children_peak_mb']:.0f} MB"),
        row(TITLE, f"start-up CPU s, {large:,} / {small:,}", [b["startup"]["cpu_s"] / a["startup"]["cpu_s"]], "<= 1.3", lambda m: m <= 1.3, f"{small:,}: {a['startup']['cpu_s']:.1f} s, {large:,}: {b['startup']['cpu_s']:.1f} s (one step and a test, one process)"),
        row(TITLE, f"main process anon MB, {large:,} - {small:,}", [b["memory"]["main_anon_mb"] - a["memory"]["main_anon_mb"]], "<= 150", lambda m: m <= 150, f"at {large:,}: {b['memory']['main_anon_mb']:.0f} MB"),
        row(TITLE, f"worker private MB after {FIRST:,} samples, {large:,} - {small:,}", [b["memory"]["worker_first_mb"] - a["memory"]["worker_first_mb"]], "<= 32", lambda m: m <= 32, f"at {large:,}: {b['memory']['worker_first_mb']:.0f} MB"),
        row(TITLE, f"worker private MB after an epoch, {large:,} - {small:,}", [b["memory"]["worker_epoch_mb"] - a["memory"]["worker_epoch_mb"]], "<= 64", lambda m: m <= 64, f"at {large:,}: {b['memory']['worker_epoch_mb']:.0f} MB"),
        row(TITLE, f"node of 8 ranks x 8 workers at {large:,}, MB (projected)", [node], fmt="{:.0f}", note="8 x main anon + 64 x worker private after an epoch"),
        row(TITLE, "node of 8 ranks x 8 workers at 10,000,000, MB (projected)", [_at(found, small, large, 10_000_000)], fmt="{:.0f}", note=f"each per-process figure on the line through {small:,} and {large:,}"),
    ]  # fmt: skip
    return rows


def _at(found: Dict[int, Dict[str, Dict[str, float]]], small: int, large: int, n: int) -> float:
    """The node projection at ``n`` samples: each process's memory extended along its measured slope."""

    def line(key: str) -> float:
        a, b = found[small]["memory"][key], found[large]["memory"][key]
        return b + (b - a) / (large - small) * (n - large)

    return 8 * line("main_anon_mb") + 64 * line("worker_epoch_mb")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1 thousand and 4 thousand samples")
    parser.add_argument("--sizes", default="", help="two comma-separated sample counts")
    parser.add_argument("--keep", default="", help="a folder to keep the PNGs and packs in between runs")
    parser.add_argument("--rounds", type=int, default=0, help="interleaved rounds of packing at the large size (2)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, *rest = args.child
        measure = {"pack": measure_pack, "startup": measure_startup, "memory": measure_memory}[what]
        print(json.dumps(measure(*rest)))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for r in run(args.quick, sizes, args.keep, args.rounds):
        print(f"{r['measure']}: {r['value']}  {r.get('goal', '')} {r.get('ok', '')} {r['note']}")


if __name__ == "__main__":
    main()
