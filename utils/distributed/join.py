"""Jobs that torchrun did not start meet within seconds, or one line says which processes are missing.

Under srun, or with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by hand, by another launcher
or left over from an earlier one, torch's ``env://`` rendezvous waits ``dist.timeout_s`` (30
minutes by default) for processes that may never come, in silence, then fails with a raw
``DistStoreError``. The usual causes: a batch script that asked for N tasks runs
``python main.py`` instead of ``srun python main.py`` (task 0 alone), or a shell that still
exports an earlier job's variables. Here process 0 opens the store, every process writes its
own key into it, and all of them wait at most ``REGTRAIN_JOIN_WAIT_S`` seconds (default 60;
``REGTRAIN_SLURM_WAIT_S`` also sets it; never longer than ``dist.timeout_s``) for the others,
saying after ``NOTICE_S`` what they wait for. The process group is then built on this store.
An address that does not resolve, or a store that cannot be opened for another network reason
(a port in use, an address of another machine), is one line naming MASTER_ADDR and MASTER_PORT.
(torchrun's own rendezvous has its own timeouts: its workers do not come here.)
"""

from __future__ import annotations

import datetime
import logging
import socket
import time
from typing import List, Mapping

import torch.distributed as dist

from utils.distributed.launcher import Launch
from utils.errors import ConfigError, first_line

log = logging.getLogger(__name__)

WAIT_ENVS = ("REGTRAIN_JOIN_WAIT_S", "REGTRAIN_SLURM_WAIT_S")
DEFAULT_WAIT_S = 60.0  # srun starts the tasks together: a minute covers a slow import on a busy shared filesystem
NOTICE_S = 5.0  # a process still waiting after this long says for what
POLL_S = 0.2
VERDICT_GRACE_S = 1.0  # process 0 keeps the store this long after its verdict: the others poll every POLL_S
_KEY = "regtrain/joined/"
_VERDICT = "regtrain/missing"


def join_wait_s(env: Mapping[str, str], timeout_s: float) -> float:
    """How long a process waits for the job's others: ``REGTRAIN_JOIN_WAIT_S`` (or ``REGTRAIN_SLURM_WAIT_S``), at most ``timeout_s``."""
    name = next((n for n in WAIT_ENVS if n in env), WAIT_ENVS[0])
    text = env.get(name, str(DEFAULT_WAIT_S))
    try:
        wait = float(text)
    except ValueError:
        wait = -1.0
    if not wait > 0:
        raise ConfigError(
            f"environment variable {name}={text!r} must be a number of seconds > 0; unset it for {DEFAULT_WAIT_S:g} s"
        )
    return min(wait, float(timeout_s))


def _job(launch: Launch) -> str:
    return "SLURM job" if launch.launcher == "slurm" else f"job of RANK/WORLD_SIZE={launch.world_size} variables"


def _member(launch: Launch, count: int = 1) -> str:
    word = "task" if launch.launcher == "slurm" else "process"
    return word if count == 1 else word + ("s" if word == "task" else "es")


def _advice(launch: Launch) -> str:
    if launch.launcher == "slurm":
        return (
            f"started without srun? Start the tasks with srun python main.py ... (a batch script runs once, as task 0), "
            f"or ask SLURM for as many tasks as you start (now SLURM_NTASKS={launch.world_size}); REGTRAIN_SLURM_WAIT_S sets this wait"
        )
    return (
        "no launcher started the other processes: unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT (left over from an earlier launch?) "
        f"to run one process, start every rank 0..{launch.world_size - 1} with these variables, or use torchrun; REGTRAIN_JOIN_WAIT_S sets this wait"
    )


def _reach(launch: Launch, wait_s: float, deadline: float) -> None:
    """Wait until process 0 listens. TCPStore's own retries would log a C++ stack per attempt."""
    noticed = False
    while True:
        try:
            with socket.create_connection(
                (launch.master_addr, launch.master_port), timeout=max(POLL_S, deadline - time.monotonic())
            ):
                return
        except OSError:  # not listening yet (refused), or an unknown / unroutable host
            if time.monotonic() >= deadline:
                raise ConfigError(
                    f"{_job(launch)}: {_member(launch)} {launch.rank} of {launch.world_size} could not reach {_member(launch)} 0 at "
                    f"{launch.master_addr}:{launch.master_port} within {wait_s:g} s; {_advice(launch)}"
                ) from None
            if not noticed and deadline - time.monotonic() <= wait_s - NOTICE_S:
                noticed = True
                log.warning(
                    "%s: %s %d of %d is waiting up to %g s for %s 0 to listen at %s:%s",
                    _job(launch),
                    _member(launch),
                    launch.rank,
                    launch.world_size,
                    wait_s,
                    _member(launch),
                    launch.master_addr,
                    launch.master_port,
                )
            time.sleep(POLL_S)


def _where(launch: Launch) -> str:
    return "in the job script, before srun" if launch.launcher == "slurm" else "for every process"


def _resolve(launch: Launch) -> None:
    """ConfigError when rank 0's address names no host: the store would retry in C++ for its whole timeout, then fail raw."""
    try:
        socket.getaddrinfo(launch.master_addr, launch.master_port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as err:  # an unknown name; a malformed one (an empty label) fails to encode
        raise ConfigError(
            f"{_job(launch)}: MASTER_ADDR={launch.master_addr!r}, the address of {_member(launch)} 0, does not resolve ({err}); "
            f"export MASTER_ADDR=<the host name or IP address of {_member(launch)} 0's machine> (127.0.0.1 when every "
            f"{_member(launch)} runs on this one) {_where(launch)}"
        ) from None


def _store_error(launch: Launch, err: dist.DistNetworkError) -> ConfigError:
    """A store that cannot be opened, as one line naming MASTER_ADDR and MASTER_PORT."""
    if "EADDRINUSE" in str(err):
        return ConfigError(
            f"{_job(launch)}: port {launch.master_port} on {launch.master_addr} is in use (another job or run there); "
            f"export MASTER_PORT=<a free port> {_where(launch)}"
        )
    reason = first_line(err)
    return ConfigError(
        f"{_job(launch)}: {_member(launch)} {launch.rank} cannot open the job's store at MASTER_ADDR={launch.master_addr} MASTER_PORT={launch.master_port} "
        f"({reason}); export MASTER_ADDR=<an address of {_member(launch)} 0's machine that the others reach> and MASTER_PORT=<a free port> {_where(launch)}"
    )


def _open_store(launch: Launch, wait_s: float, deadline: float) -> dist.TCPStore:
    """Process 0 serves the store; the others connect to it."""
    _resolve(launch)
    timeout = datetime.timedelta(seconds=max(POLL_S, deadline - time.monotonic()))
    try:
        if launch.rank != 0:
            _reach(launch, wait_s, deadline)
            return dist.TCPStore(launch.master_addr, launch.master_port, launch.world_size, False, timeout)
        return dist.TCPStore(
            launch.master_addr, launch.master_port, launch.world_size, True, timeout, wait_for_workers=False
        )
    except dist.DistNetworkError as err:
        raise _store_error(launch, err) from None


def _all_joined(store: dist.TCPStore, keys: List[str], launch: Launch) -> bool:
    try:
        return store.check(keys)
    except dist.DistNetworkError:
        if launch.rank == 0:
            raise
        # process 0 gave up first (its line names the missing ones) and took the store with it
        raise ConfigError(
            f"{_job(launch)}: {_member(launch)} 0 at {launch.master_addr}:{launch.master_port} ended while {_member(launch)} {launch.rank} waited for the job's "
            f"{launch.world_size} {_member(launch, 2)} (its error names the missing ones); {_advice(launch)}"
        ) from None


def _missing(store: dist.TCPStore, launch: Launch) -> List[int]:
    return [rank for rank in range(launch.world_size) if not store.check([f"{_KEY}{rank}"])]


def _missing_line(missing: List[int], launch: Launch, wait_s: float) -> str:
    """The line naming the processes that have not joined."""
    shown = ", ".join(map(str, missing[:8])) + (f", ... ({len(missing)} in all)" if len(missing) > 8 else "")
    return (
        f"{_job(launch)}: {launch.world_size - len(missing)} of {launch.world_size} {_member(launch, 2)} joined within {wait_s:g} s "
        f"(missing: {_member(launch, len(missing))} {shown}) at {launch.master_addr}:{launch.master_port}; {_advice(launch)}"
    )


def join_store(launch: Launch, wait_s: float, timeout: datetime.timedelta) -> dist.TCPStore:
    """The store every process of the job joined within ``wait_s`` seconds (``timeout``: for its later use).

    When processes are missing, process 0 leaves its error line in the store before it
    exits, so the processes that did join stop with the same line (without it, they
    would lose the store and log C++ stacks).
    """
    deadline = time.monotonic() + wait_s
    store = _open_store(launch, wait_s, deadline)
    store.set(f"{_KEY}{launch.rank}", "1")
    keys = [f"{_KEY}{rank}" for rank in range(launch.world_size)]
    noticed = False
    while not _all_joined(store, keys, launch):
        if launch.rank != 0 and store.check([_VERDICT]):
            raise ConfigError(store.get(_VERDICT).decode())
        left = deadline - time.monotonic()
        if left <= (0 if launch.rank == 0 else -VERDICT_GRACE_S):  # the others wait for process 0's verdict
            message = _missing_line(_missing(store, launch), launch, wait_s)
            if launch.rank == 0:
                store.set(_VERDICT, message)
                time.sleep(VERDICT_GRACE_S)
            raise ConfigError(message)
        if not noticed and left <= wait_s - NOTICE_S:
            noticed = True
            missing = _missing(store, launch)
            log.warning(
                "%s: waiting up to %g s for %s %s to join at %s:%s (%d of %d joined)",
                _job(launch),
                wait_s,
                _member(launch, len(missing)),
                ", ".join(map(str, missing[:8])),
                launch.master_addr,
                launch.master_port,
                launch.world_size - len(missing),
                launch.world_size,
            )
        time.sleep(POLL_S)
    store.set_timeout(timeout)
    return store
