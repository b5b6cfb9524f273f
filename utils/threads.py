"""How many CPU threads one process computes with, and how its waiting threads wait.

torch runs its CPU operators on OpenMP threads (GNU OpenMP in the pip wheels), one
per core by default, and a thread that waits for the others spins on its core
for about 3 ms (300000 turns) before it sleeps. Where other processes use the
same cores, the spinning threads take the cores from the threads they wait for:
the quick start took 227 s instead of 32 s (``threads=1``) beside a torch matmul
loop on a 2-core machine, and 115 s instead of 14 s with other jobs on it
(``benchmarks/threads.py``). ``main.py`` therefore sets ``GOMP_SPINCOUNT=3000``
(about 30 us of spinning) before torch loads OpenMP, unless the user set
``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``. Measured on 2 cores, medians of 3
to 5 runs: beside the matmul loop, ``threads=1`` 13.7 s, spin 1000 17.6 s,
spin 3000 19.1 s (1.4x), spin 10000 22.3 s (1.6x), ``OMP_WAIT_POLICY=PASSIVE``
(no spinning) 17.8 s, OpenMP's default 100-270 s; without it, OpenMP's default
8.9 s, spin 3000 8.3 s, spin 1000 10.7 s, ``PASSIVE`` 10.4 s, ``threads=1``
9.8 s: the shortest spin that keeps an otherwise idle machine as fast as before.

The thread count stays a function of the machine, not of its momentary load:
another count gives other floating-point sums (1e-7 in the weights after 20
steps of the quick start), so a count that followed the load would make two runs
of one seed differ and break a bit-identical ``--resume``. ``threads=N`` in the
config (or ``OMP_NUM_THREADS``) sets it by hand.
"""

from __future__ import annotations

import os
from typing import Mapping, NamedTuple, Optional

import torch

WAIT_SETTINGS = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")  # how OpenMP threads wait (main.py sets the first)


class Threads(NamedTuple):
    """The intra-op thread count chosen and where it came from (for the start's log line)."""

    count: int
    source: str


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity: taskset, cgroups' cpusets, SLURM's --cpus-per-task)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # macOS has no affinity call
        return os.cpu_count() or 1


def local_processes(environ: Mapping[str, str] = os.environ) -> int:
    """This machine's processes of the launch (torchrun's ``LOCAL_WORLD_SIZE``; 1 outside one, or when unreadable)."""
    local = environ.get("LOCAL_WORLD_SIZE", "1")
    return int(local) if local.isdigit() and int(local) > 0 else 1


def choose_threads(setting: Optional[int], environ: Mapping[str, str] = os.environ) -> Threads:
    """The thread count: ``threads`` when set; ``OMP_NUM_THREADS`` when the user (or torchrun) set it, which
    torch has read already; else torch's own count (one per physical core, or what the program that calls
    ``main()`` set), at most the usable cores, shared among this machine's processes of the job
    (``LOCAL_WORLD_SIZE``: each process of a launch that did not set ``OMP_NUM_THREADS`` gets its share)."""
    if setting is not None:
        return Threads(setting, f"threads={setting}")
    if environ.get("OMP_NUM_THREADS", "").strip():
        return Threads(torch.get_num_threads(), f"OMP_NUM_THREADS={environ['OMP_NUM_THREADS'].strip()}")
    processes = local_processes(environ)
    cores = usable_cores()
    shared = f" / {processes} processes" if processes > 1 else ""
    return Threads(max(1, min(torch.get_num_threads(), cores) // processes), f"{cores} usable cores{shared}")


def apply_threads(threads: Threads) -> None:
    """Set torch's intra-op thread count (a no-op when it is already that count)."""
    if torch.get_num_threads() != threads.count:
        torch.set_num_threads(threads.count)


def describe(threads: Threads, environ: Mapping[str, str] = os.environ) -> str:
    """``"2 CPU threads (2 usable cores; GOMP_SPINCOUNT=3000)"``: what the start's log line says."""
    waits = [f"{key}={environ[key]}" for key in WAIT_SETTINGS if key in environ] or ["OpenMP's default wait"]
    return f"{threads.count} CPU thread{'s' if threads.count != 1 else ''} ({threads.source}; {', '.join(waits)})"
