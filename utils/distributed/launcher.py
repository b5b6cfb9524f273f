"""Who started this process: torchrun / torch.distributed.launch, SLURM's srun, or nobody.

torchrun describes the job in RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT. ``srun`` starts every task itself and describes it in SLURM's own
variables instead; from them come the same five values, so one ``srun python main.py``
per task joins the process group. torchrun's variables win when both exist (torchrun
started inside an sbatch script, one task per node).

Variables left over from an earlier launch (a RANK without MASTER_ADDR, a rank not
below the world size) are refused with a line naming them: otherwise they give a raw
traceback, or a process that waits for peers nobody started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, MutableMapping, Optional, Tuple

from utils.errors import ConfigError

PORT_BASE = 15000  # a job's port: PORT_BASE + the job id's last 4 digits, the same on every node
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")  # torchrun's description of one process
ADDRESS_VARS = ("MASTER_ADDR", "MASTER_PORT")  # where rank 0 listens: torchrun sets them with the others


@dataclass
class Launch:
    """The process's place in the job and where rank 0 listens."""

    launcher: str  # torchrun | slurm | env (RANK/WORLD_SIZE set by hand or another launcher) | none
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


def _fix(*names: str) -> str:
    """How to get valid launcher variables ``names``: from the launcher that sets them."""
    it = "it" if len(names) == 1 else "them"
    if names[0].startswith("SLURM_"):
        return f"start the tasks with srun, which sets {it}"
    if names == ("MASTER_PORT",):
        return "export a free port number, or unset it"
    return f"unset {' and '.join(names) if len(names) > 1 else it} (left over from an earlier launch?) or start the run with torchrun, which sets {it}"


def _int(env: Mapping[str, str], name: str, default: int = 0, minimum: int = 0, maximum: Optional[int] = None) -> int:
    """The launcher's variable ``name`` (``default`` when unset) as an integer >= ``minimum`` (and <= ``maximum``)."""
    if name not in env:
        return default
    try:
        value = int(env[name])
    except ValueError:
        raise ConfigError(f"environment variable {name}={env[name]!r} must be an integer; {_fix(name)}") from None
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"in {minimum}..{maximum}" if maximum is not None else f">= {minimum}"
        raise ConfigError(f"environment variable {name}={value} must be {bound}; {_fix(name)}")
    return value


def _port(env: Mapping[str, str]) -> int:
    """``MASTER_PORT`` as a TCP port (1..65535): a larger one is a raw TypeError in the store, 0 a port no peer can know."""
    return _int(env, "MASTER_PORT", minimum=1, maximum=65535)


def _place(env: Mapping[str, str], rank_name: str, size_name: str) -> Tuple[int, int]:
    """The rank and world size; a rank outside ``[0, world size)`` is a leftover or a typo."""
    rank, size = _int(env, rank_name), _int(env, size_name, default=1, minimum=1)
    if rank >= size:
        size_text = env[size_name] if size_name in env else "1 (not set)"
        raise ConfigError(
            f"environment variable {rank_name}={rank} must be below {size_name}={size_text} (ranks count from 0); {_fix(rank_name, size_name)}"
        )
    return rank, size


def _torchrun(env: Mapping[str, str]) -> Launch:
    """torchrun's description of this process; a distributed one without rank 0's address is a leftover.
    Without torchrun's own variables (``TORCHELASTIC_RUN_ID``) the variables were set by hand, by another
    launcher or left over: an ``env`` launch, whose processes meet within a short wait (``join.py``)."""
    rank, size = _place(env, "RANK", "WORLD_SIZE")
    missing = [name for name in ADDRESS_VARS if not env.get(name)]
    if size > 1 and missing:
        found = [name for name in LAUNCH_VARS if name in env]
        raise ConfigError(
            f"environment variable{'s' if len(found) > 1 else ''} {', '.join(f'{n}={env[n]}' for n in found)} describe{'' if len(found) > 1 else 's'} a distributed run, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not set: no launcher started this process (left over from an earlier launch?); "
            f"unset {' '.join(found)} to run one process, or start the run with torchrun (torchrun --nproc_per_node={size} main.py ...)"
        )
    if size > 1 and "TORCHELASTIC_RUN_ID" not in env:
        return Launch("env", rank, size, _int(env, "LOCAL_RANK"), env["MASTER_ADDR"], _port(env))
    return Launch("torchrun", rank, size, _int(env, "LOCAL_RANK"))


def _slurm(env: Mapping[str, str]) -> Launch:
    """srun's description of this task; rank 0 listens on the job's first host, on the job's port."""
    rank, size = _place(env, "SLURM_PROCID", "SLURM_NTASKS")
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or "localhost"
    addr = env.get("MASTER_ADDR") or first_host(nodelist)
    port = _port(env) if env.get("MASTER_PORT") else job_port(env.get("SLURM_JOB_ID", "0"))
    return Launch("slurm", rank, size, _int(env, "SLURM_LOCALID"), addr, port)


def resolve_launch(env: Mapping[str, str]) -> Launch:
    """The job as torchrun's variables describe it, else as srun's (``SLURM_PROCID`` and ``SLURM_NTASKS``), else one process.

    Under srun, torchrun's variables count only with rank 0's address (MASTER_ADDR and
    MASTER_PORT, which torchrun always sets): without it they are leftovers, and
    SLURM's describe the job.
    """
    torchrun = "RANK" in env or "WORLD_SIZE" in env
    slurm = "SLURM_PROCID" in env and "SLURM_NTASKS" in env
    if torchrun and (not slurm or all(env.get(name) for name in ADDRESS_VARS)):
        return _torchrun(env)
    if slurm:
        return _slurm(env)
    return Launch("none", local_rank=_int(env, "LOCAL_RANK"))


def export_launch(launch: Launch, env: MutableMapping[str, str]) -> None:
    """Write a SLURM launch into torchrun's variables, which ``init_process_group("env://")`` reads."""
    if launch.launcher != "slurm":
        return
    env.update(
        {
            "RANK": str(launch.rank),
            "WORLD_SIZE": str(launch.world_size),
            "LOCAL_RANK": str(launch.local_rank),
            "MASTER_ADDR": str(launch.master_addr),
            "MASTER_PORT": str(launch.master_port),
        }
    )
