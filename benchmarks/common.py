"""Shared helpers: interleaved repeated timing, ratio rows, tiny synthetic data, spawned process groups."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

SCRATCH = "REGTRAIN_BENCH_SCRATCH"  # the suite's tmp folder: its benchmarks write nothing into the checkout


def scratch(prefix: str) -> Path:
    """A new folder for a benchmark's files on the disk runs write to (``output/``), or under $REGTRAIN_BENCH_SCRATCH."""
    parent = Path(os.environ.get(SCRATCH) or Path(__file__).resolve().parents[1] / "output")
    parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def timed(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved(cases: Dict[str, Callable[[], float]], rounds: int, warmup: bool = True) -> Dict[str, List[float]]:
    """Run every case once per round, rotating the order each round.

    Each case returns its own measurement (seconds). Interleaving spreads a
    slow period of a shared machine over all cases instead of one, and the
    rounds show how noisy a figure is.
    """
    names = list(cases)
    if warmup:
        for name in names:
            cases[name]()
    results: Dict[str, List[float]] = {name: [] for name in names}
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            results[name].append(cases[name]())
    return results


def row(
    benchmark: str,
    measure: str,
    values: Sequence[float],
    goal: str = "",
    check: Optional[Callable[[float], bool]] = None,
    note: str = "",
    fmt: str = "{:.3f}",
) -> dict:
    """A table row: the median of per-round values, their range, and ``check(median)`` against the goal."""
    values = list(values)
    median = statistics.median(values) if values else float("nan")
    ok = bool(check(median)) if check is not None else None
    spread = f"{fmt.format(min(values))} .. {fmt.format(max(values))} (n={len(values)})" if values else ""
    return {
        "benchmark": benchmark,
        "measure": measure,
        "value": fmt.format(median),
        "spread": spread,
        "goal": goal,
        "ok": ok,
        "note": note,
        "median": median,
    }


def ratios(numerators: Sequence[float], denominators: Sequence[float]) -> List[float]:
    """Per-round ratios (each pair measured back to back in the same round)."""
    return [a / b for a, b in zip(numerators, denominators)]


def batches(
    n: int, batch_size: int, shape: Tuple[int, ...], num_classes: int = 10, seed: int = 0
) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """``n`` random (inputs, labels) batches, fixed by ``seed``."""
    g = torch.Generator().manual_seed(seed)
    return [
        (torch.randn(batch_size, *shape, generator=g), torch.randint(0, num_classes, (batch_size,), generator=g))
        for _ in range(n)
    ]


def max_abs_diff(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> float:
    """Largest elementwise difference between two state dicts (floats only)."""
    return max((float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].is_floating_point()), default=0.0)


def framework_epoch(
    model: torch.nn.Module,
    data: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    criterion: Any = None,
    device: torch.device = torch.device("cpu"),
    log_every: int = 10,
) -> int:
    """One epoch of the framework's Trainer over ``data`` with the hooks every run calls per step
    (the writer's loss read at log steps, the progress hook, the stop signal; as on a rank that writes no files). Returns the steps taken."""
    from utils.amp import Amp
    from utils.config.schema import AmpConfig
    from utils.distributed.process_group import DistInfo
    from utils.engine.trainer import Trainer
    from utils.engine.trainer_types import LoopOptions, Parts
    from utils.hook.progress import ProgressHook
    from utils.model.criterion import build_criterion

    criterion = criterion if criterion is not None else build_criterion([{"name": "cross_entropy", "weight": 1.0}])
    amp = Amp(AmpConfig(opt_level="O0"), device)
    model, optimizer = amp.initialize(model, optimizer)
    parts = Parts(model, criterion, amp, optimizer, scheduler, train_loader=data)
    trainer = Trainer(parts, LoopOptions(log_every=log_every), hooks=[ProgressHook(10)], dist=DistInfo(device=device))
    try:
        trainer.fit()
    finally:
        trainer.close()
    return trainer.state.step


def hand_loop(model: torch.nn.Module, data: Any, optimizer: torch.optim.Optimizer, scheduler: Any = None) -> None:
    """The training loop a user writes without a framework: zero_grad, forward, cross-entropy, backward, step."""
    model.train()
    for inputs, targets in data:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()


def _in_group(rank: int, world: int, port: int, figures: Callable, args: tuple, timeout_s: float, result: str) -> None:
    """One spawned process: one thread, a gloo group, ``figures(rank, world, *args)``; rank 0's as JSON to ``result``."""
    from utils.distributed.spawned import gloo_group

    with gloo_group(rank, world, port, timeout_s):
        found = figures(rank, world, *args)
        if rank == 0:
            Path(result).write_text(json.dumps(found))


def in_processes(figures: Callable, world: int, args: tuple, timeout_s: float, what: str) -> dict:
    """Rank 0's result of ``figures(rank, world, *args)`` run on ``world`` spawned processes in one gloo
    group (``figures`` must be a module-level function); a run past ``timeout_s`` is killed."""
    import torch.multiprocessing as mp

    from utils.distributed.spawned import free_port, join_within

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        result = str(Path(tmp) / "result.json")
        ctx = mp.start_processes(
            _in_group,
            args=(world, free_port(), figures, args, timeout_s, result),
            nprocs=world,
            join=False,
            start_method="spawn",
        )
        join_within(ctx, timeout_s, what)
        return json.loads(Path(result).read_text())


def loader_bench_main(doc: str, run: Callable[[bool, int, int], List[dict]], argv: Optional[List[str]] = None) -> None:
    """The command line of the loader benchmarks (``--quick``, ``--images N``, ``--rounds R``): each row printed."""
    import argparse

    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="256 images, 1 round, no warm-up")
    parser.add_argument("--images", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # as benchmarks/run.py: one thread per process
    for r in run(args.quick, args.images, args.rounds):
        print(
            f"{r['measure']}: {r['value']}  [{r.get('spread', '')}] {r.get('goal', '')} {r.get('ok', '')} {r.get('note', '')}"
        )
