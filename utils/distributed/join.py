"""Under srun, the job's tasks meet within seconds, or one line says which are missing.

torch's ``env://`` rendezvous waits ``dist.timeout_s`` (30 minutes by default) for
tasks that may never come, then fails with a raw ``DistStoreError``. The usual
cause: a batch script that asked for N tasks runs ``python main.py`` instead of
``srun python main.py``, which starts task 0 alone. Here task 0 opens the store,
every task writes its own key into it, and all of them wait at most
``REGTRAIN_SLURM_WAIT_S`` seconds (default 60; never longer than
``dist.timeout_s``) for the others. The process group is then built on this store.
"""

from __future__ import annotations

import datetime
import socket
import time
from typing import List, Mapping

import torch.distributed as dist

from utils.distributed.launcher import Launch
from utils.errors import ConfigError

WAIT_ENV = "REGTRAIN_SLURM_WAIT_S"
DEFAULT_WAIT_S = 60.0  # srun starts the tasks together: a minute covers a slow import on a busy shared filesystem
POLL_S = 0.2
VERDICT_GRACE_S = 1.0  # task 0 keeps the store this long after its verdict: the other tasks poll every POLL_S
_KEY = "regtrain/slurm_joined/"
_VERDICT = "regtrain/slurm_missing"


def join_wait_s(env: Mapping[str, str], timeout_s: float) -> float:
    """How long a task waits for the job's other tasks: ``REGTRAIN_SLURM_WAIT_S``, at most ``timeout_s``."""
    text = env.get(WAIT_ENV, str(DEFAULT_WAIT_S))
    try:
        wait = float(text)
    except ValueError:
        wait = -1.0
    if not wait > 0:
        raise ConfigError(f"environment variable {WAIT_ENV}={text!r} must be a number of seconds > 0; unset it for {DEFAULT_WAIT_S:g} s")
    return min(wait, float(timeout_s))


def _advice(launch: Launch) -> str:
    return (f"started without srun? Start the tasks with srun python main.py ... (a batch script runs once, as task 0), "
            f"or ask SLURM for as many tasks as you start (now SLURM_NTASKS={launch.world_size}); {WAIT_ENV} sets this wait")


def _reach(launch: Launch, wait_s: float, deadline: float) -> None:
    """Wait until task 0 listens. TCPStore's own retries would log a C++ stack per attempt."""
    while True:
        try:
            with socket.create_connection((launch.master_addr, launch.master_port), timeout=max(POLL_S, deadline - time.monotonic())):
                return
        except OSError:  # not listening yet (refused), or an unknown / unroutable host
            if time.monotonic() >= deadline:
                raise ConfigError(f"SLURM job: task {launch.rank} of {launch.world_size} could not reach task 0 at {launch.master_addr}:{launch.master_port} "
                                  f"within {wait_s:g} s; {_advice(launch)}") from None
            time.sleep(POLL_S)


def _open_store(launch: Launch, wait_s: float, deadline: float) -> dist.TCPStore:
    """Task 0 serves the store; the others connect to it."""
    timeout = datetime.timedelta(seconds=max(POLL_S, deadline - time.monotonic()))
    if launch.rank != 0:
        _reach(launch, wait_s, deadline)
        return dist.TCPStore(launch.master_addr, launch.master_port, launch.world_size, False, timeout)
    try:
        return dist.TCPStore(launch.master_addr, launch.master_port, launch.world_size, True, timeout, wait_for_workers=False)
    except dist.DistNetworkError as err:
        if "EADDRINUSE" not in str(err):
            raise
        raise ConfigError(f"SLURM job: port {launch.master_port} on {launch.master_addr} is in use (another job or run there); "
                          "export MASTER_PORT=<a free port> in the job script, before srun") from None


def _all_joined(store: dist.TCPStore, keys: List[str], launch: Launch) -> bool:
    try:
        return store.check(keys)
    except dist.DistNetworkError:
        if launch.rank == 0:
            raise
        # task 0 gave up first (its line names the missing tasks) and took the store with it
        raise ConfigError(f"SLURM job: task 0 at {launch.master_addr}:{launch.master_port} ended while task {launch.rank} waited for the job's "
                          f"{launch.world_size} tasks (its error names the missing ones); {_advice(launch)}") from None


def _missing_tasks(store: dist.TCPStore, launch: Launch, wait_s: float) -> str:
    """The line naming the tasks that have not joined."""
    missing = [rank for rank in range(launch.world_size) if not store.check([f"{_KEY}{rank}"])]
    shown = ", ".join(map(str, missing[:8])) + (f", ... ({len(missing)} in all)" if len(missing) > 8 else "")
    return (f"SLURM job: {launch.world_size - len(missing)} of {launch.world_size} tasks joined within {wait_s:g} s "
            f"(missing: task{'s' if len(missing) > 1 else ''} {shown}) at {launch.master_addr}:{launch.master_port}; {_advice(launch)}")


def join_slurm_store(launch: Launch, wait_s: float, timeout: datetime.timedelta) -> dist.TCPStore:
    """The store every task of the job joined within ``wait_s`` seconds (``timeout``: for its later use).

    When tasks are missing, task 0 leaves its error line in the store before it
    exits, so the tasks that did join stop with the same line (without it, they
    would lose the store and log C++ stacks).
    """
    deadline = time.monotonic() + wait_s
    store = _open_store(launch, wait_s, deadline)
    store.set(f"{_KEY}{launch.rank}", "1")
    keys = [f"{_KEY}{rank}" for rank in range(launch.world_size)]
    while not _all_joined(store, keys, launch):
        if launch.rank != 0 and store.check([_VERDICT]):
            raise ConfigError(store.get(_VERDICT).decode())
        if time.monotonic() >= deadline + (0 if launch.rank == 0 else VERDICT_GRACE_S):  # the others wait for task 0's verdict
            message = _missing_tasks(store, launch, wait_s)
            if launch.rank == 0:
                store.set(_VERDICT, message)
                time.sleep(VERDICT_GRACE_S)
            raise ConfigError(message)
        time.sleep(POLL_S)
    store.set_timeout(timeout)
    return store
