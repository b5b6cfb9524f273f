"""Measures on one CUDA device: seconds per step between synchronizations, peak allocated bytes, and the
host-device synchronizations a piece of code makes."""

from __future__ import annotations

import time
import warnings
from typing import Callable

import torch


def seconds_per_step(step: Callable[[], None], steps: int) -> Callable[[], float]:
    def measure() -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / steps

    return measure


def peak_bytes(step: Callable[[], None]) -> int:
    """Peak allocated bytes over two steps after a first (the optimizer state exists by then)."""
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    step()
    step()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def count_syncs(fn: Callable[[], object]) -> int:
    """Synchronizing CUDA calls during ``fn`` (each one a warning under sync debug mode 'warn')."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message) for w in caught)
