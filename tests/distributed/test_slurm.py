"""srun launch: SLURM's variables describe the job when torchrun's are absent; two real processes train together."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT, fast_overrides, subprocess_env
from utils.distributed.launcher import Launch, first_host, job_port, resolve_launch
from utils.errors import ConfigError

# what srun sets for task 5 of `sbatch --nodes=2 --ntasks-per-node=4` (README: SLURM)
SRUN = {
    "SLURM_PROCID": "5",
    "SLURM_NTASKS": "8",
    "SLURM_LOCALID": "1",
    "SLURM_JOB_NODELIST": "gpu[07-08]",
    "SLURM_JOB_ID": "4242424",
}
TORCHRUN = {
    "RANK": "3",
    "WORLD_SIZE": "4",
    "LOCAL_RANK": "3",
    "MASTER_ADDR": "10.0.0.1",
    "MASTER_PORT": "29500",
    "TORCHELASTIC_RUN_ID": "none",
}


def test_srun_variables_give_rank_world_size_local_rank_first_host_and_a_job_port():
    assert resolve_launch(SRUN) == Launch(
        "slurm", rank=5, world_size=8, local_rank=1, master_addr="gpu07", master_port=15000 + 2424
    )
    assert first_host("node-a[009-011,2],login1") == "node-a009" and first_host("localhost") == "localhost"
    assert job_port("12345678") == 15000 + 5678 and job_port("7") == 15007
    # an address or port the job script exported is kept
    assert resolve_launch({**SRUN, "MASTER_ADDR": "ib-gpu07", "MASTER_PORT": "23456"}).master_addr == "ib-gpu07"
    assert resolve_launch({**SRUN, "MASTER_PORT": "23456"}).master_port == 23456


def test_torchrun_variables_win_over_slurm_and_nothing_means_one_process():
    assert resolve_launch({**SRUN, **TORCHRUN}) == Launch("torchrun", rank=3, world_size=4, local_rank=3)
    assert resolve_launch({}) == Launch("none") and resolve_launch({"LOCAL_RANK": "2"}).local_rank == 2
    # the same variables without torchrun's own (set by hand, another launcher, or left over): they meet in a short wait
    by_hand = {k: v for k, v in TORCHRUN.items() if k != "TORCHELASTIC_RUN_ID"}
    assert resolve_launch(by_hand) == Launch(
        "env", rank=3, world_size=4, local_rank=3, master_addr="10.0.0.1", master_port=29500
    )


def test_a_broken_node_list_is_an_error_naming_it():
    with pytest.raises(ConfigError, match=r"SLURM_JOB_NODELIST='gpu\[07-' is not a node list"):
        resolve_launch({**SRUN, "SLURM_JOB_NODELIST": "gpu[07-"})


def free_job_port() -> int:
    """A free loopback port in the range job ids map to (15000-24999)."""
    for port in range(15000 + os.getpid() % 9000, 25000):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 15000-24999")


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_srun_style_processes_train_one_epoch_together_and_agree_on_the_replicas(out_root):
    job_id = str(free_job_port() - 15000 + 90000)  # the job's port is 15000 + its id's last 4 digits
    procs = []
    for rank in range(2):
        env = {
            k: v
            for k, v in subprocess_env().items()
            if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_ERROR_FILE")
        }
        env.update(
            {
                "SLURM_PROCID": str(rank),
                "SLURM_NTASKS": "2",
                "SLURM_LOCALID": str(rank),
                "SLURM_JOB_NODELIST": "localhost",
                "SLURM_JOB_ID": job_id,
            }
        )
        cmd = [
            sys.executable,
            "main.py",
            *fast_overrides(out_root, "slurm", epochs=1),
            "device=cpu",
            "data.batch_size=32",
            "dist.timeout_s=120",
        ]
        procs.append(
            subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    try:
        results = [proc.communicate(timeout=240) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in results]
    log = (out_root / "slurm" / "latest" / "log.txt").read_text()
    assert "2 process(es) (launcher: slurm), device cpu" in log
    assert "replicas identical on 2 rank(s)" in log
    # rank 0 prints
    assert [line for line in results[0][0].splitlines() if line.startswith("test: ")] and not results[1][0].strip()
