"""Process groups on this machine for tests and benchmarks: a free port, a gloo group per spawned rank,
and waiting for spawned ranks with a deadline.

``ProcessContext.join`` alone waits forever for a rank that hangs (a collective its peer never
enters); tests and benchmarks that spawn ranks wait through ``join_within`` so a hang fails fast.
"""

from __future__ import annotations

import datetime
import socket
import time
from contextlib import contextmanager
from typing import Any, Iterator

import torch
import torch.distributed as dist

from utils.distributed.process_group import import_before_process_group


def free_port() -> int:
    """A TCP port free on the loopback interface now (for a store or a rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def gloo_group(rank: int, world: int, port: int, timeout_s: float) -> Iterator[None]:
    """A spawned rank's gloo group on the loopback ``port``, with one CPU thread; destroyed on the way out."""
    torch.set_num_threads(1)
    import_before_process_group()  # see there: an abort at exit otherwise, now and then
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://127.0.0.1:{port}",
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


def join_within(ctx: Any, timeout_s: float, what: str) -> None:
    """Wait for every process of ``ctx``; past ``timeout_s`` kill them all and raise TimeoutError naming ``what``.
    A process that failed raises its error here (``ProcessContext.join``)."""
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            raise TimeoutError(f"{what} did not finish in {timeout_s} s")
