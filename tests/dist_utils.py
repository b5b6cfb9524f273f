"""Helpers for tests that run real processes: free ports, launchers with deadlines, spawned gloo groups."""

from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, List, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from tests.conftest import ROOT, subprocess_env
from utils.distributed.process_group import import_before_process_group

PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def torchrun(nproc: int, *args: str) -> List[str]:
    """``torchrun --nproc_per_node=nproc main.py args`` on a free loopback port."""
    return [PYTHON, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1", f"--master_port={free_port()}", "main.py", *args]


def launch(nproc: int, *args: str) -> List[str]:
    """The legacy launcher: ``python -m torch.distributed.launch`` passes ``--local-rank=N``."""
    return [PYTHON, "-m", "torch.distributed.launch", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1", f"--master_port={free_port()}", "main.py", *args]


def run(cmd: Sequence[str], timeout: float = 240) -> subprocess.CompletedProcess:
    """Run ``cmd`` in the repo root; a hang becomes a test failure after ``timeout`` s."""
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    return subprocess.run(list(cmd), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _worker(rank: int, world_size: int, port: int, fn: Callable, out_dir: str, args: tuple) -> None:
    torch.set_num_threads(1)
    import_before_process_group()  # see there: an abort at exit otherwise, now and then
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=60))
    try:
        torch.save(fn(rank, world_size, *args), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def spawn(fn: Callable, world_size: int, out_dir: Path, *args: Any, timeout: float = 120) -> List[Any]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` spawned gloo processes; their results in rank order."""
    ctx = mp.start_processes(_worker, args=(world_size, free_port(), fn, str(out_dir), args), nprocs=world_size, join=False, start_method="spawn")
    deadline = time.monotonic() + timeout
    while not ctx.join(timeout=1):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            raise TimeoutError(f"{fn.__name__} on {world_size} ranks did not finish in {timeout} s")
    return [torch.load(out_dir / f"rank{r}.pt", weights_only=False) for r in range(world_size)]


RECORDED_DIGITS = [  # digits that record the order each rank reads its samples in, with SyncBN
    "custom_imports=[tests.fixtures.recorded_digits]",
    "data.name=recorded_digits",
    "model.sync_bn=true",
    "model.args.backbone_args={widths: [8, 16]}",
    "data.prefetch=none",  # reads happen when the loop asks: the records are in consumption order
]


def global_batches(record: Path, world_size: int, global_batch: int) -> List[List[int]]:
    """The global batches a run read (``tests/fixtures/recorded_digits.py``): each rank's slices of
    ``global_batch / world_size``, side by side, for as many steps as every rank recorded."""
    local = global_batch // world_size
    reads = [[int(x) for x in Path(f"{record}.rank{r}").read_text().split()] for r in range(world_size)]
    count = min(len(r) for r in reads) // local
    return [sum((reads[r][k * local : (k + 1) * local] for r in range(world_size)), []) for k in range(count)]
