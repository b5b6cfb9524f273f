"""Waiting for processes started with ``torch.multiprocessing.start_processes(join=False)``, with a deadline.

``ProcessContext.join`` alone waits forever for a rank that hangs (a collective its peer never
enters); tests and benchmarks that spawn ranks wait through ``join_within`` so a hang fails fast.
"""

from __future__ import annotations

import time
from typing import Any


def join_within(ctx: Any, timeout_s: float, what: str) -> None:
    """Wait for every process of ``ctx``; past ``timeout_s`` kill them all and raise TimeoutError naming ``what``.
    A process that failed raises its error here (``ProcessContext.join``)."""
    deadline = time.monotonic() + timeout_s
    while not ctx.join(timeout=1.0):
        if time.monotonic() > deadline:
            for proc in ctx.processes:
                proc.kill()
            raise TimeoutError(f"{what} did not finish in {timeout_s} s")
