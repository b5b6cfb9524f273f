"""Process-group set-up and teardown from the launcher's environment (torchrun, torch.distributed.launch, srun).

The launchers describe the job in environment variables (torchrun: RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR/PORT; srun: SLURM_*, see ``launcher.py``); without them the
run is a single process.
"""

from __future__ import annotations

import datetime
import importlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Dict, NoReturn, Optional

import torch
import torch.distributed as dist

from utils.distributed.device import need_cuda
from utils.distributed.join import join_store, join_wait_s
from utils.distributed.launcher import Launch, export_launch, resolve_launch
from utils.errors import ConfigError, UserError, one_line

log = logging.getLogger(__name__)


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")
    launcher: str = "none"  # torchrun (also torch.distributed.launch) | slurm | env | none
    backend: str = ""  # the process group's (nccl | gloo); none for one process

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``auto`` picks the GPU of this local rank when CUDA is available, else the CPU."""
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        need_cuda("device=cuda", torch.device("cuda"), "use device=cpu or device=auto")
        # srun may bind one GPU to each task (CUDA_VISIBLE_DEVICES): then it is device 0
        index = 0 if torch.cuda.device_count() == 1 else local_rank
        torch.cuda.set_device(index)
        return torch.device("cuda", index)
    return torch.device("cpu")


def shared_gpu_error(err: Exception, local_processes: str, gpus: int) -> Exception:
    """nccl's refusal of two ranks on one GPU as the config error it is; any other failure as it was."""
    if "Duplicate GPU detected" not in str(err):
        return err
    return ConfigError(
        f"nccl needs one GPU per process, but {local_processes} processes on this node share {gpus} GPU(s); "
        f"start at most {gpus} per node (torchrun --nproc_per_node={gpus}), or use dist.backend=gloo"
    )


def choose_backend(backend: str, device: torch.device) -> str:
    """The process group's backend: ``auto`` is nccl on CUDA, gloo on the CPU. nccl moves CUDA
    tensors only: on the CPU it would fail in the first collective, after the whole set-up."""
    if backend == "auto":
        return "nccl" if device.type == "cuda" else "gloo"
    if backend == "nccl" and device.type != "cuda":
        need_cuda("dist.backend=nccl", device, "use dist.backend=auto (gloo on the CPU) or dist.backend=gloo")
    return backend


def _restart_store(rank: int, world_size: int, timeout: datetime.timedelta) -> Dict[str, Any]:
    """After a ``torchrun --max-restarts`` restart, the launcher's store under a per-attempt prefix.

    The restarted workers join through the same store as the failed attempt, whose
    keys (the gloo addresses of the dead processes among them) are still there; a
    new worker could read one and fail with "connection refused".
    """
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    if attempt == 0:
        return {}
    from torch.distributed.rendezvous import rendezvous

    store, _, _ = next(rendezvous("env://", rank, world_size, timeout=timeout))
    return {"store": dist.PrefixStore(f"restart{attempt}/", store), "rank": rank, "world_size": world_size}


def _joined_store(launch: Launch, timeout_s: int, timeout: datetime.timedelta) -> Dict[str, Any]:
    """Under srun or hand-set variables, a store all processes joined within a short wait, not dist.timeout_s (see ``join.py``)."""
    store = join_store(launch, join_wait_s(os.environ, timeout_s), timeout)
    return {"store": store, "rank": launch.rank, "world_size": launch.world_size}


def import_before_process_group() -> None:
    """Import ``torch._dynamo`` before a process group is created.

    torch imports it lazily (the first ``optimizer.step()`` does). Imported after a
    gloo process group exists, the process now and then aborts at interpreter exit
    ("terminate called without an active exception"; torch 2.15, 2 ranks: about 1 run
    in 10, none in 35 with this import first). It costs about 0.5 s, in distributed runs only.
    """
    importlib.import_module("torch._dynamo")


def init_distributed(device: str = "auto", backend: str = "auto", timeout_s: int = 1800) -> DistInfo:
    """Join the process group the launcher described (torchrun, launch, srun), or run as one process."""
    launch = resolve_launch(os.environ)
    export_launch(launch, os.environ)  # srun: init_process_group reads torchrun's variables
    rank, world_size, local_rank = launch.rank, launch.world_size, launch.local_rank
    dev = resolve_device(device, local_rank)
    chosen = ""
    if world_size > 1 and not dist.is_initialized():
        backend = chosen = choose_backend(backend, dev)
        timeout = datetime.timedelta(seconds=timeout_s)
        import_before_process_group()
        try:
            dist.init_process_group(
                backend=backend,
                timeout=timeout,
                **(
                    _joined_store(launch, timeout_s, timeout)
                    if launch.launcher in ("slurm", "env")
                    else _restart_store(rank, world_size, timeout)
                ),
                **({"device_id": dev} if dev.type == "cuda" else {}),
            )
        except dist.DistBackendError as err:
            raise shared_gpu_error(
                err, os.environ.get("LOCAL_WORLD_SIZE", "several"), torch.cuda.device_count()
            ) from err
        log.info(
            "process group (%s): backend=%s rank=%d/%d local_rank=%d device=%s",
            launch.launcher,
            backend,
            rank,
            world_size,
            local_rank,
            dev,
        )
    return DistInfo(rank, world_size, local_rank, dev, launch.launcher, chosen)


def cleanup() -> None:
    """Leave the process group after a run that went well (safe to call when none exists)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


# How long a rank that failed with a bug waits before exiting (see exit_now): well above torchrun's
# default --monitor-interval (0.1 s), so the launcher sees a peer that failed first before this rank.
PEER_GRACE_S = 2.0


def record_failure(err: BaseException) -> None:
    """``err`` into torchrun's error file (``TORCHELASTIC_ERROR_FILE``), which its summary prints as the root cause.
    Bad input (a ``UserError``) goes as its one line without a traceback, which torchrun's summary would print for
    it (20 lines of the framework's frames under the ``[rankN] error:`` line that already said everything);
    anything else with its traceback, as torch records it."""
    from torch.distributed.elastic.multiprocessing.errors import get_error_handler

    if not isinstance(err, UserError):
        get_error_handler().record_exception(err)
        return
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if path:
        message = {
            "message": f"{type(err).__name__}: {one_line(err)}",
            "extraInfo": {"timestamp": str(int(time.time()))},
        }
        with open(path, "w") as fh:
            json.dump({"message": message}, fh)


def exit_now(code: int, err: Optional[BaseException] = None, wait_s: float = 0.0) -> NoReturn:
    """End this rank after a failure in a distributed run (call it in an ``except`` block).

    A rank that fails must not wait for its peers: ``destroy_process_group``,
    a pending collective or interpreter shutdown (joining loader threads) can
    block on ranks that are themselves blocked on this one. The launcher sees
    the exit code and stops the other ranks; ``err`` goes to torchrun's error
    file, so its summary names the root cause.

    torchrun names as root cause the failure with the earliest timestamp, in
    whole seconds, and on a tie the lowest rank among those it saw exit in the
    same poll. A rank that fails on bad input makes its peers fail within
    milliseconds (their collectives lose the connection), in the same second
    and often in the same poll, so rank 0 used to be named. A failure that may
    be such a consequence (any failure but bad input) therefore waits
    ``wait_s`` before exiting: by then the launcher has seen the rank that
    failed first, and stops this one itself.
    """
    if err is not None:
        try:
            record_failure(err)
        except Exception:  # the report is a courtesy; exiting is what matters
            pass
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    if wait_s > 0:
        time.sleep(wait_s)
    os._exit(code)
