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

``--tiled 10000000,100000000`` measures the start-up from splits of those sizes instead, against 10,000 measured
in the same run: a 10,000-sample pack's training split tiled (its shards hardlinked under new numbers, its arrays
tiled, each copy's keys prefixed ``c000123/``, ``index.json`` written by the writer's own ``finish``, and the split
checked whole once, as ``--mode pack`` leaves it). Each start is ``main.py`` with 2 loader workers, one step,
validation and test, watched from outside: the CPU of the whole process tree, the wall time to the end of the
first step, the main process's anonymous memory at its peak and each loader worker's private memory (polled every
20 ms). Goals, against 10,000: at 10M <= 1.3x CPU, <= 1.5x wall, anonymous <= +100 MB; at 100M <= 2x CPU and
wall, anonymous <= +200 MB; workers flat.

``--window W`` (with ``--tiled``) starts with ``data.args.shuffle_window=W``: the window order's grouping is computed
and kept by one start per size first, and the measured starts map it.

``python benchmarks/bench_index_scale.py [--quick] [--sizes 10000,1000000] [--tiled N,...] [--window W] [--keep DIR]``
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


BASE = 10_000  # the tiled splits' pack, and the size they are measured against
BLOCK = 100  # copies tiled at once: about a million rows


def tile_pack(base: Path, out: Path, count: int) -> Path:
    """``out``: ``base``'s pack with its training split tiled to ``count`` samples (made once: a marker says so)."""
    import numpy as np

    from utils.data.shards.index import INDEX, parse_header
    from utils.data.shards.writer import create_arrays, finish, shard_name
    from utils.files.owned import hard_link, make_dirs

    done = out / ".tiled"
    if done.is_file():
        return out
    shutil.rmtree(out, ignore_errors=True)
    for split in ("val", "test"):  # as they are
        make_dirs(out.parent, out / split)
        for file in (base / split).iterdir():
            hard_link(out, file, out / split / file.name)
    src = base / "train"
    header = parse_header((src / INDEX).read_bytes(), str(src / INDEX))
    samples, members, keys = (np.load(src / f"{name}.npy") for name in ("samples", "members", "keys"))
    n, copies = len(samples), count // len(samples)
    assert copies * n == count and not len(np.load(src / "stems.npy")), "a whole number of copies, no stems"
    width = 8  # "c000123/"
    starts = samples["key"].astype(np.int64)  # each key's start in one copy, prefixes included
    lines = np.diff(np.append(starts, len(keys)))
    one = np.zeros(len(keys) + n * width, np.uint8)
    first = starts + np.arange(n) * width
    for k in range(n):
        one[first[k] : first[k] + width] = np.frombuffer(b"c000000/", np.uint8)
        one[first[k] + width : first[k] + width + lines[k]] = keys[starts[k] : starts[k] + lines[k]]
    folder = out / "train"
    arrays = create_arrays(
        folder, {"samples": count, "members": copies * len(members), "keys": copies * len(one), "stems": 0}
    )
    per = len(header.shards)
    shards = []
    for c in range(copies):
        for k, shard in enumerate(header.shards):
            name = shard_name(c * per + k)
            hard_link(folder, src / shard.name, folder / name)
            shards.append(type(shard)(name, shard.samples, shard.sha256, shard.bytes))
    for c0 in range(0, copies, BLOCK):
        b = min(BLOCK, copies - c0)
        copy = np.repeat(np.arange(c0, c0 + b, dtype=np.int64), n)
        block = np.tile(samples, b)
        block["shard"] += (copy * per).astype(np.uint32)
        block["member"] += (copy * len(members)).astype(np.uint64)
        block["key"] = np.tile(first, b) + copy * len(one)
        arrays["samples"][c0 * n : (c0 + b) * n] = block
        arrays["members"][c0 * len(members) : (c0 + b) * len(members)] = np.tile(members, b)
        text = np.tile(one, b).reshape(b, len(one))
        for d in range(6):  # the copy's number in its prefix's digits
            text[:, first + 1 + d] = (48 + (np.arange(c0, c0 + b) // 10 ** (5 - d)) % 10)[:, None].astype(np.uint8)
        arrays["keys"][c0 * len(one) : (c0 + b) * len(one)] = text.reshape(-1)
    facts = {"split": "train", "task": header.task, "dataset": header.dataset, "classes": header.classes}
    facts.update(count=count, extensions=header.extensions)
    finish(folder, arrays, facts, shards)
    del arrays
    subprocess.run([sys.executable, "-c", f"from pathlib import Path; from utils.data.shards.index_load import check_packed; check_packed(Path({str(folder)!r}))"], env={**os.environ, **CHILD_ENV}, check=True)  # fmt: skip
    done.touch()
    return out


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    return 0


def measure_start(pack: Path, out: Path, window: int = 0) -> Dict[str, float]:
    """One start of ``main.py`` from ``pack`` (2 loader workers, a step, validation and test; ``window``: with that
    ``shuffle_window``), watched from here."""
    import resource

    data_args = f"data.args={{channels: 1{f', shuffle_window: {window}' if window else ''}}}"
    args = [f"data.root={pack}", "data.name=image_folder", data_args, "model.input_size=[1, 8, 8]"]
    args += ["train.iterations=1", "data.num_workers=2", f"experiment.output_root={out}", "threads=1"]
    args += ["custom_imports=[benchmarks.first_step]", "hooks=[{name: first_step_time}]"]
    shutil.rmtree(out, ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    log = open(out.parent / "start.log", "w")  # the run's log lines: read when a start fails
    proc = subprocess.Popen(
        [sys.executable, "main.py", *args], cwd=ROOT, env={**os.environ, **CHILD_ENV}, stdout=subprocess.PIPE,
        stderr=log, text=True,
    )  # fmt: skip
    anon, workers = 0, {}
    while proc.poll() is None:
        try:
            anon = max(anon, _status_kb(proc.pid, "RssAnon:"))
            kids = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
            for kid in map(int, kids):
                workers[kid] = max(workers.get(kid, 0.0), _private_dirty_mb(kid))
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    out_text = proc.stdout.read() if proc.stdout else ""
    log.close()
    assert proc.wait() == 0, f"the start failed: see {out.parent / 'start.log'}"
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    first = float(next(line for line in out_text.splitlines() if line.startswith("first step done at")).split()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "cpu_s": cpu,
        "wall_s": first - start,
        "anon_mb": anon / 1024,
        "worker_mb": max(workers.values(), default=0.0),
    }


def run_tiled(sizes: Sequence[int], keep: str, rounds: int, window: int = 0) -> List[dict]:
    """The start-up rows of ``--tiled``: each size against ``BASE`` in ``rounds`` interleaved rounds (medians);
    ``window``: with ``shuffle_window``, after one start per size that computes and keeps the window order's grouping
    (its figures printed, not counted)."""
    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="index-tiled-"))
    try:
        data = make_pngs(work / f"png-{BASE}", BASE)
        base = work / f"pack-{BASE}"
        if not (base / "test" / "index.json").is_file():
            shutil.rmtree(base, ignore_errors=True)
            child("pack", str(data), str(base), CORES)
        packs = {BASE: base}
        for n in sizes:
            began = time.perf_counter()
            packs[n] = tile_pack(base, work / f"tiled-{n}", n)
            print(f"tiled {n:,}: {time.perf_counter() - began:.0f} s", file=sys.stderr, flush=True)
        for n in (BASE, *sizes) if window else ():
            first = measure_start(packs[n], work / "out", window)
            print(f"first start at {n:,} (the grouping computed and kept): {first}", file=sys.stderr, flush=True)
        runs: Dict[int, List[Dict[str, float]]] = {}
        for r in range(rounds):
            for n in (BASE, *sizes) if r % 2 == 0 else (*sizes, BASE):
                runs.setdefault(n, []).append(measure_start(packs[n], work / "out", window))
                print(f"start at {n:,}: {runs[n][-1]}", file=sys.stderr, flush=True)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    med = {n: {k: statistics.median(m[k] for m in ms) for k in ms[0]} for n, ms in runs.items()}
    a, note = med[BASE], f"against {BASE:,}, {CORES} cores, load {os.getloadavg()[0]:.2f}, {rounds} round(s)"
    note += f", shuffle_window={window}" if window else ""
    rows = []
    for n in sizes:
        b, big = med[n], n >= 100_000_000
        cpu, wall, anon = (2.0, 2.0, 200) if big else (1.3, 1.5, 100)
        rows += [
            row(TITLE, f"start-up CPU, whole tree, {n:,} / {BASE:,}", [b["cpu_s"] / a["cpu_s"]], f"<= {cpu}", lambda m, g=cpu: m <= g, f"{a['cpu_s']:.1f} vs {b['cpu_s']:.1f} s; {note}"),
            row(TITLE, f"wall to the first step, {n:,} / {BASE:,}", [b["wall_s"] / a["wall_s"]], f"<= {wall}", lambda m, g=wall: m <= g, f"{a['wall_s']:.1f} vs {b['wall_s']:.1f} s"),
            row(TITLE, f"main anon MB at its peak, {n:,} - {BASE:,}", [b["anon_mb"] - a["anon_mb"]], f"<= {anon}", lambda m, g=anon: m <= g, f"{a['anon_mb']:.0f} vs {b['anon_mb']:.0f} MB"),
            row(TITLE, f"loader worker private MB, {n:,} - {BASE:,}", [b["worker_mb"] - a["worker_mb"]], "flat", None, f"{a['worker_mb']:.1f} vs {b['worker_mb']:.1f} MB"),
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
    parser.add_argument("--tiled", default="", help="comma-separated sizes of tiled splits, e.g. 10000000,100000000")
    parser.add_argument("--window", type=int, default=0, help="with --tiled: starts with this shuffle_window")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, *rest = args.child
        measure = {"pack": measure_pack, "startup": measure_startup, "memory": measure_memory}[what]
        print(json.dumps(measure(*rest)))
        return
    sizes = [int(s) for s in args.sizes.split(",") if s]
    tiled = [int(s) for s in args.tiled.split(",") if s]
    if tiled:
        rows = run_tiled(tiled, args.keep, args.rounds or 2, args.window)
    else:
        rows = run(args.quick, sizes, args.keep, args.rounds)
    for r in rows:
        print(f"{r['measure']}: {r['value']}  {r.get('goal', '')} {r.get('ok', '')} {r['note']}")


if __name__ == "__main__":
    main()
