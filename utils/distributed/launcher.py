"""Who started this process: torchrun / torch.distributed.launch, SLURM's srun, or nobody.

torchrun describes the job in RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT. ``srun`` starts every task itself and describes it in SLURM's own
variables instead; from them come the same five values, so one ``srun python main.py``
per task joins the process group. torchrun's variables win when both exist (torchrun
started inside an sbatch script, one task per node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, MutableMapping, Optional

from utils.errors import ConfigError

PORT_BASE = 15000  # a job's port: PORT_BASE + the job id's last 4 digits, the same on every node


@dataclass
class Launch:
    """The process's place in the job and where rank 0 listens."""

    launcher: str  # torchrun | slurm | none
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: Optional[str] = None
    master_port: Optional[int] = None


def first_host(nodelist: str) -> str:
    """The first host of a SLURM node list such as ``gpu[07-08,11],login1`` (``gpu07``)."""
    import hostlist  # python-hostlist: SLURM's hostlist syntax, expanded without calling scontrol

    try:
        hosts = hostlist.expand_hostlist(nodelist)
    except hostlist.BadHostlist as err:
        raise ConfigError(f"SLURM_JOB_NODELIST={nodelist!r} is not a node list SLURM writes ({err})") from None
    if not hosts:
        raise ConfigError(f"SLURM_JOB_NODELIST={nodelist!r} names no host")
    return hosts[0]


def job_port(job_id: str) -> int:
    """A port derived from the job id (15000-24999), so every task of the job agrees on it."""
    digits = "".join(c for c in job_id if c.isdigit())
    return PORT_BASE + int(digits[-4:] or 0)


def _int(env: Mapping[str, str], name: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ConfigError(f"environment variable {name}={env[name]!r} must be an integer") from None


def resolve_launch(env: Mapping[str, str]) -> Launch:
    """The job as torchrun's variables describe it, else as srun's (``SLURM_PROCID`` and ``SLURM_NTASKS``), else one process."""
    if "RANK" in env or "WORLD_SIZE" in env:
        return Launch("torchrun", _int(env, "RANK") if "RANK" in env else 0, _int(env, "WORLD_SIZE") if "WORLD_SIZE" in env else 1,
                      _int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0)
    if "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "localhost"
        addr = env.get("MASTER_ADDR") or first_host(nodelist)
        port = _int(env, "MASTER_PORT") if env.get("MASTER_PORT") else job_port(env.get("SLURM_JOB_ID", "0"))
        return Launch("slurm", _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS"), _int(env, "SLURM_LOCALID") if "SLURM_LOCALID" in env else 0, addr, port)
    return Launch("none", local_rank=_int(env, "LOCAL_RANK") if "LOCAL_RANK" in env else 0)


def export_launch(launch: Launch, env: MutableMapping[str, str]) -> None:
    """Write a SLURM launch into torchrun's variables, which ``init_process_group("env://")`` reads."""
    if launch.launcher != "slurm":
        return
    env.update({"RANK": str(launch.rank), "WORLD_SIZE": str(launch.world_size), "LOCAL_RANK": str(launch.local_rank),
                "MASTER_ADDR": str(launch.master_addr), "MASTER_PORT": str(launch.master_port)})
