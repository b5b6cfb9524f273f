"""Sample lists and epoch orders as numpy arrays against the per-sample Python lists they replaced.

Synthetic keys (``class_0123/img_00001234.jpg``, 1,000 classes) at 10 thousand, 1 million and 10
million samples; orders as rank 0 of 8 sees them (``data.global_batch_size=256``, a local batch of
32), and a shard-window order of shards of 1,000 samples in a seeded shuffle, ``shuffle_window=4``.
Per size: the epoch start (``set_epoch``, ``iter``, the first index) of each sampler and of the window
order; ``train.record_samples``' indices of an epoch's first step of all 8 ranks on rank 0; the data
fingerprint; the keys cut from the root against ``os.path.relpath``; the cost of a batch of 32 through
torch's ``BatchSampler`` once the epoch runs (the order computed as it goes); the bytes held per sample. The
"before" side is the code the arrays replaced (``tests/fixtures/loop_orders.py``, torch's
``DistributedSampler``, whose ``randperm`` of the whole split each epoch start drew before the index
shuffle), measured in the same run, interleaved, up to 1 million samples (at 10 million it takes minutes and
gigabytes).

``python benchmarks/bench_sample_arrays.py [--quick] [--rounds R] [--sizes 10000,1000000,10000000]``
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable, Dict, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import BatchSampler, DistributedSampler  # noqa: E402

from benchmarks.common import interleaved, ratios, row  # noqa: E402
from tests.fixtures.loop_orders import (  # noqa: E402
    loop_batches,
    loop_fingerprint,
    loop_global_rank,
)
from utils.data.identity import relative_key  # noqa: E402
from utils.data.sample_order import epoch_batches_of_all_ranks  # noqa: E402
from utils.data.samplers import GlobalBatchSampler, ResumableSampler, WindowOrder  # noqa: E402
from utils.data.string_table import StringTable  # noqa: E402

TITLE = "22 sample arrays"
RANKS, GLOBAL, LOCAL, SHARD, WINDOW = 8, 256, 32, 1000, 4
OLD_UP_TO = 1_000_000  # the Python lists are measured up to this size
ROOT_FOLDER = "/data/imagenet/train"


class Sized:
    """What DistributedSampler needs of a dataset: its length."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def keys(n: int):
    return (f"class_{i % 1000:04d}/img_{i:08d}.jpg" for i in range(n))


def timed(fn: Callable[[], object]) -> Callable[[], float]:
    def once() -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start

    return once


def first_index(sampler: object, epoch: List[int]) -> Callable[[], object]:
    """An epoch start: the next epoch set, its iterator made, its first index drawn."""

    def start() -> object:
        epoch[0] += 1
        sampler.set_epoch(epoch[0])
        return next(iter(sampler))

    return start


def per_batch(sampler: object, batches: int = 2000) -> Callable[[], float]:
    """Seconds per batch of ``LOCAL`` indices through torch's BatchSampler (as a DataLoader draws them),
    after the epoch start."""

    def once() -> float:
        sampler.set_epoch(0)
        drawn = iter(BatchSampler(sampler, LOCAL, drop_last=False))
        next(drawn)
        count = min(batches, len(sampler) // LOCAL - 1)
        start = time.perf_counter()
        for _ in range(count):
            next(drawn)
        return (time.perf_counter() - start) / count

    return once


def old_global(n: int) -> Callable[[], object]:
    def start() -> object:
        order = torch.randperm(n, generator=torch.Generator().manual_seed(1))
        return next(iter(loop_global_rank(order, GLOBAL, RANKS, 0)))

    return start


def old_record(n: int) -> Callable[[], object]:
    def record() -> object:  # each rank's order computed on its own, then the batches side by side
        orders = []
        for rank in range(RANKS):
            order = torch.randperm(n, generator=torch.Generator().manual_seed(1))
            orders.append(loop_global_rank(order, GLOBAL, RANKS, rank))
        return loop_batches(orders, LOCAL)

    return record


def argsort_grouped(shard_of: np.ndarray) -> np.ndarray:
    """The window order's grouping as one stable argsort of every sample's shard (how it was computed before the
    counting sort): 16-bit radix keys where the shards allow, int64 ones otherwise, and int64 indices narrowed."""
    counts = np.bincount(shard_of)
    present = counts > 0
    group = (np.cumsum(present) - 1)[shard_of]
    narrow = group.astype(np.uint16 if present.sum() <= 1 << 16 else np.int64)
    return np.argsort(narrow, kind="stable").astype(np.int32)


def peak_of(make: Callable[[], Any]) -> Tuple[Any, float, float]:
    """What ``make()`` returns, its seconds, and the most MB of numpy arrays it held at once (tracemalloc sees
    numpy's allocations), the result included."""
    tracemalloc.start()
    start = time.perf_counter()
    made = make()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return made, seconds, peak


def python_bytes(strings: Sequence[str]) -> float:
    """Bytes a list of ``strings`` holds (the list and each string object)."""
    return sys.getsizeof(strings) + sum(sys.getsizeof(s) for s in strings)


def run_size(n: int, rounds: int) -> List[dict]:
    old = n <= OLD_UP_TO
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in keys(n):
        pass
    strings_s = time.perf_counter() - start
    start = time.perf_counter()
    table = StringTable.from_strings(keys(n))
    build_s = time.perf_counter() - start
    window = WindowOrder(rng.permutation(n) // SHARD, WINDOW)
    (members, _), group_s, group_mb = peak_of(lambda: window.grouped)  # once per run
    argsorted, argsort_s, argsort_mb = peak_of(lambda: argsort_grouped(window.shard_of))
    assert np.array_equal(argsorted, members)
    del argsorted
    resumable, global_ = ResumableSampler(Sized(n), RANKS, 0, 1), GlobalBatchSampler(n, GLOBAL, 0, RANKS, 1)
    windowed = GlobalBatchSampler(n, GLOBAL, 0, RANKS, 1, window=window)
    cases: Dict[str, Callable[[], float]] = {
        "resumable": timed(first_index(resumable, [0])),
        "global": timed(first_index(global_, [0])),
        "window": timed(first_index(windowed, [0])),
        "record": timed(lambda: epoch_batches_of_all_ranks(global_, 1, RANKS, LOCAL).span(0, 1)),
        "fingerprint": timed(table.sha256),
        "batch": per_batch(global_),
    }
    paths: List[str] = []
    if old:
        listed = table.tolist()
        paths = [f"{ROOT_FOLDER}/{key}" for key in listed]
        plain = DistributedSampler(Sized(n), RANKS, 0, shuffle=True, seed=1)
        cases.update(
            {
                "resumable old": timed(first_index(plain, [0])),
                "global old": timed(old_global(n)),
                "record old": timed(old_record(n)),
                "fingerprint old": timed(lambda: loop_fingerprint(listed)),
                "keys": timed(lambda: [relative_key(p, ROOT_FOLDER) for p in paths]),
                "keys old": timed(lambda: [os.path.relpath(p, ROOT_FOLDER) for p in paths]),
                "batch old": per_batch(plain),
            }
        )
    times = interleaved(cases, rounds, warmup=n < OLD_UP_TO)
    size = f"{n:,}"
    rows = [
        row(
            TITLE,
            f"{size}: key table built from a generator, s",
            [build_s],
            fmt="{:.3f}",
            note=f"of which the f-string generator alone takes about {strings_s:.3f} s",
        ),
        row(TITLE, f"{size}: window order grouped (once per run), s", [group_s], fmt="{:.3f}"),
        row(TITLE, f"{size}: window order grouped, one argsort / counting sort", [argsort_s / max(group_s, 1e-9)]),
        row(
            TITLE,
            f"{size}: window order grouped, peak MB, counting sort",
            [group_mb],
            note=f"one argsort: {argsort_mb:.0f} MB",
        ),
    ]
    for name, what in (
        ("resumable", "epoch start, ResumableSampler rank 0 of 8"),
        ("global", "epoch start, GlobalBatchSampler rank 0 of 8"),
        ("window", "epoch start, GlobalBatchSampler with a shard window"),
        ("record", "record_samples' first step of 8 ranks"),
        ("fingerprint", "data fingerprint"),
    ):
        goal, check = ("<= 0.5", lambda m: m <= 0.5) if name == "record" and n >= 10_000_000 else ("", None)
        rows.append(row(TITLE, f"{size}: {what}, s", times[name], goal, check, fmt="{:.4f}"))
        if old and f"{name} old" in times:
            rows.append(row(TITLE, f"{size}: {what}, lists / arrays", ratios(times[f"{name} old"], times[name])))
    rows.append(row(TITLE, f"{size}: a batch of 32 through BatchSampler, us", [t * 1e6 for t in times["batch"]]))
    if old:
        rows.append(row(TITLE, f"{size}: the same before, us", [t * 1e6 for t in times["batch old"]]))
        rows.append(row(TITLE, f"{size}: keys by relpath / by the root cut", ratios(times["keys old"], times["keys"])))
    held = {
        "key table": table.nbytes,
        "labels (int32)": 4 * n,
        "window order": window.shard_of.nbytes + members.nbytes,
    }
    for what, nbytes in held.items():
        rows.append(row(TITLE, f"{size}: bytes per sample, {what}", [nbytes / n], fmt="{:.2f}"))
    if old:
        batches = old_record(n)()
        held = sum(sys.getsizeof(b) + sum(sys.getsizeof(i) for i in b) for b in batches) + sys.getsizeof(batches)
        note = "a list of lists of Python ints, as before"
        rows.append(row(TITLE, f"{size}: bytes per sample, record_samples' batches as lists", [held / n], note=note))
        samples = [(path, i % 1000) for i, path in enumerate(paths)]  # the labels: small ints, shared objects
        held = python_bytes(paths) - sys.getsizeof(paths) + sys.getsizeof(samples) + sys.getsizeof(samples[0]) * n
        note = "image_folder's list of (path, label) tuples, as before; now the key table and the labels"
        rows.append(row(TITLE, f"{size}: bytes per sample, sample list as Python tuples", [held / n], note=note))
    return rows


def run(quick: bool = False, rounds: int = 0, sizes: Sequence[int] = ()) -> List[dict]:
    sizes = sizes or ((10_000, 100_000) if quick else (10_000, 1_000_000, 10_000_000))
    rows: List[dict] = []
    for n in sizes:
        rows += run_size(n, rounds or (1 if quick else 3 if n <= OLD_UP_TO else 2))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="10 thousand and 100 thousand samples, 1 round")
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--sizes", type=str, default="", help="comma-separated sample counts")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as benchmarks/run.py: one thread per process
    load = os.getloadavg()[0]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    for r in run(args.quick, args.rounds, sizes):
        print(
            f"{r['measure']}: {r['value']}  [{r.get('spread', '')}] {r.get('goal', '')} {r.get('ok', '')} {r['note']}"
        )
    print(f"{os.cpu_count()} cores, load {load:.2f} -> {os.getloadavg()[0]:.2f}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
