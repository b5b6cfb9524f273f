"""Distributed set-up errors are one ``error:`` line naming the fix, and come within seconds:
stray launcher variables, a backend the device cannot use, a SLURM job missing tasks."""

from __future__ import annotations

import datetime
import re
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest

import main
from tests.conftest import ROOT, fast_overrides, subprocess_env
from tests.fixtures.dist_utils import free_port
from tests.fixtures.forked_main import MainServer
from utils.distributed.join import join_store, join_wait_s
from utils.distributed.launcher import Launch, resolve_launch
from utils.errors import ConfigError

LAUNCH_VARS = (
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_ERROR_FILE",
    "TORCHELASTIC_RUN_ID",
    "REGTRAIN_JOIN_WAIT_S",
    "REGTRAIN_SLURM_WAIT_S",
)
SLURM = {"SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "localhost", "SLURM_JOB_ID": "4242"}

# name -> (environment, extra arguments, expected message)
CASES: Dict[str, tuple] = {
    "RANK/WORLD_SIZE without MASTER_ADDR": (
        {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
        [],
        r"^error: environment variables RANK=0, WORLD_SIZE=2, LOCAL_RANK=0 describe a distributed run, but MASTER_ADDR, MASTER_PORT are not set: "
        r"no launcher started this process \(left over from an earlier launch\?\); unset RANK WORLD_SIZE LOCAL_RANK to run one process, or start the run with torchrun",
    ),
    "WORLD_SIZE not an integer": (
        {"RANK": "0", "WORLD_SIZE": "two"},
        [],
        r"^error: environment variable WORLD_SIZE='two' must be an integer; unset it \(left over from an earlier launch\?\) or start the run with torchrun, which sets it$",
    ),
    "RANK not below WORLD_SIZE": (
        {"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
        [],
        r"^error: environment variable RANK=2 must be below WORLD_SIZE=2 \(ranks count from 0\); unset RANK and WORLD_SIZE \(left over from an earlier launch\?\) or start the run with torchrun, which sets them$",
    ),
    "RANK without WORLD_SIZE": (
        {"RANK": "1"},
        [],
        r"^error: environment variable RANK=1 must be below WORLD_SIZE=1 \(not set\) \(ranks count from 0\)",
    ),
    "SLURM_PROCID not below SLURM_NTASKS": (
        {**SLURM, "SLURM_PROCID": "2"},
        [],
        r"^error: environment variable SLURM_PROCID=2 must be below SLURM_NTASKS=2 \(ranks count from 0\); .*start the tasks with srun, which sets them$",
    ),
    "MASTER_PORT out of range": (
        {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "99999"},
        [],
        r"^error: environment variable MASTER_PORT=99999 must be in 1..65535; export a free port number, or unset it$",
    ),
    "MASTER_ADDR that does not resolve": (
        {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "nonexistent.invalid", "MASTER_PORT": "free"},
        ["device=cpu"],
        r"^error: job of RANK/WORLD_SIZE=2 variables: MASTER_ADDR='nonexistent.invalid', the address of process 0, does not resolve \(.*\); "
        r"export MASTER_ADDR=<the host name or IP address of process 0's machine> \(127.0.0.1 when every process runs on this one\) for every process$",
    ),
    "dist.backend=nccl on the CPU": (
        {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "free"},
        ["device=cpu", "dist.backend=nccl"],
        r"^error: dist.backend=nccl needs a CUDA device, but (CUDA is not available here|the run uses cpu); "
        r"use dist.backend=auto \(gloo on the CPU\) or dist.backend=gloo$",
    ),
}


@pytest.fixture
def clean_env(monkeypatch):
    """No launcher variables from the test's own environment."""
    for name in LAUNCH_VARS + tuple(k for k in subprocess_env() if k.startswith("SLURM_")):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_launch_environment_is_one_line_and_exit_code_2(case, clean_env, tmp_path, capsys):
    env, extra, expected = CASES[case]
    for name, value in env.items():
        clean_env.setenv(name, str(free_port()) if value == "free" else value)
    # a short collective timeout: before these checks existed, some cases waited for peers
    assert main.main([*fast_overrides(tmp_path, "bad", epochs=1), "dist.timeout_s=5", *extra]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if "error:" in line]
    assert len(errors) == 1, err
    assert re.search(expected, errors[0]), errors[0]
    assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_stray_launcher_variables_say_what_they_wait_for_then_fail(clean_env, tmp_path, capsys, caplog):
    """RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT left over from another launch: before, the process waited
    dist.timeout_s (30 minutes by default) in silence for a rank nobody started."""
    for name, value in {
        "RANK": "0",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
        "REGTRAIN_JOIN_WAIT_S": "6",
    }.items():
        clean_env.setenv(name, value)
    start = time.time()
    assert main.main([*fast_overrides(tmp_path, "stray", epochs=1)]) == 2
    assert time.time() - start < 20
    notice = [r for r in caplog.records if "waiting up to 6 s for process 1 to join at 127.0.0.1" in r.getMessage()]
    assert notice and notice[0].created - start < 8, caplog.text
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert line.startswith(
        "error: job of RANK/WORLD_SIZE=2 variables: 1 of 2 processes joined within 6 s (missing: process 1) at 127.0.0.1:"
    )
    assert (
        "unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT (left over from an earlier launch?) to run one process" in line
    )


def test_launcher_variables_that_describe_one_process_or_a_slurm_task_are_accepted():
    assert resolve_launch({"RANK": "0", "WORLD_SIZE": "1"}).world_size == 1  # harmless leftovers of a 1-process launch
    # torchrun's variables without its address under srun: they are not torchrun's, SLURM's describe the job
    launch = resolve_launch({**SLURM, "SLURM_PROCID": "1", "RANK": "0", "WORLD_SIZE": "1"})
    assert (launch.launcher, launch.rank, launch.world_size) == ("slurm", 1, 2)
    with pytest.raises(
        ConfigError, match=r"MASTER_PORT='x' must be an integer; export a free port number, or unset it"
    ):
        resolve_launch({**SLURM, "SLURM_PROCID": "0", "MASTER_PORT": "x"})


def slurm_tasks(
    server: MainServer, ranks: Sequence[int], ntasks: int, tmp_path: Path
) -> List[subprocess.CompletedProcess]:
    """``python main.py`` (forked: ``tests/fixtures/forked_main.py``) as tasks ``ranks`` of a SLURM job of
    ``ntasks`` tasks whose other tasks never start."""
    env = {k: v for k, v in subprocess_env().items() if k not in LAUNCH_VARS and not k.startswith("SLURM_")}
    env.update({**SLURM, "SLURM_NTASKS": str(ntasks), "MASTER_PORT": str(free_port()), "REGTRAIN_SLURM_WAIT_S": "3"})
    args = [*fast_overrides(tmp_path, "slurm", epochs=1), "device=cpu", "dist.timeout_s=600"]
    runs = [server.start(args, ROOT, {**env, "SLURM_PROCID": str(r), "SLURM_LOCALID": str(r)}, 90) for r in ranks]
    return [run.wait(90) for run in runs]


MISSING = r"^error: SLURM job: {joined} of {ntasks} tasks joined within 3 s \(missing: {missing}\) at localhost:\d+; started without srun\? Start the tasks with srun python main.py \.\.\. \(a batch script runs once, as task 0\)"
SLURM_CASES = {  # tasks started, of how many -> the line every started task prints
    "task 0 of 2": ((0,), 2, MISSING.format(joined=1, ntasks=2, missing="task 1")),
    "tasks 0, 1 of 4": ((0, 1), 4, MISSING.format(joined=2, ntasks=4, missing="tasks 2, 3")),
    "task 1 of 2": (
        (1,),
        2,
        r"^error: SLURM job: task 1 of 2 could not reach task 0 at localhost:\d+ within 3 s; started without srun\?",
    ),
}


@pytest.fixture(scope="module")
def slurm_jobs(main_server, tmp_path_factory) -> Dict[str, Tuple[float, List[subprocess.CompletedProcess]]]:
    """Every case's tasks, the cases side by side (each mostly waits for its missing tasks): (seconds, tasks)."""

    def timed(case: str) -> Tuple[float, List[subprocess.CompletedProcess]]:
        ranks, ntasks, _ = SLURM_CASES[case]
        start = time.monotonic()
        done = slurm_tasks(main_server, ranks, ntasks, tmp_path_factory.mktemp("slurm"))
        return time.monotonic() - start, done

    with ThreadPoolExecutor(max_workers=len(SLURM_CASES)) as pool:
        return dict(zip(SLURM_CASES, pool.map(timed, SLURM_CASES)))


@pytest.mark.slow
@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(SLURM_CASES))
def test_slurm_tasks_missing_are_named_within_seconds(case, slurm_jobs):
    """A batch script that runs ``python main.py`` without srun starts task 0 alone; before,
    it waited dist.timeout_s (here 600 s) and then failed with a raw DistStoreError."""
    _, ntasks, expected = SLURM_CASES[case]
    seconds, tasks = slurm_jobs[case]
    for proc in tasks:
        assert proc.returncode == 2, proc.stderr[-3000:]
        (line,) = [line for line in proc.stderr.splitlines() if "error:" in line]
        assert re.search(expected, line) and line.endswith(
            f"(now SLURM_NTASKS={ntasks}); REGTRAIN_SLURM_WAIT_S sets this wait"
        ), line
        assert "Traceback" not in proc.stderr and "frame #" not in proc.stderr, proc.stderr[-3000:]
    assert seconds < 60


def test_the_slurm_wait_is_a_number_of_seconds_at_most_the_collective_timeout():
    assert (
        join_wait_s({}, 1800) == 60
        and join_wait_s({"REGTRAIN_SLURM_WAIT_S": "5"}, 1800) == 5
        and join_wait_s({}, 20) == 20
    )
    with pytest.raises(
        ConfigError, match=r"REGTRAIN_SLURM_WAIT_S='soon' must be a number of seconds > 0; unset it for 60 s"
    ):
        join_wait_s({"REGTRAIN_SLURM_WAIT_S": "soon"}, 1800)


def test_ports_outside_the_tcp_range_are_refused_where_the_variables_are_read():
    for port in ("0", "65536", "-1"):
        with pytest.raises(
            ConfigError,
            match=rf"^environment variable MASTER_PORT={port} must be in 1..65535; export a free port number, or unset it$",
        ):
            resolve_launch({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port})
    with pytest.raises(ConfigError, match=r"MASTER_PORT=70000 must be in 1..65535"):
        resolve_launch({**SLURM, "SLURM_PROCID": "0", "MASTER_PORT": "70000"})
    assert (
        resolve_launch({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "65535"}).master_port
        == 65535
    )


def test_a_store_that_cannot_be_opened_is_one_line_naming_master_addr_and_port(monkeypatch):
    import torch.distributed as dist

    def unreachable(*args, **kwargs):
        raise dist.DistNetworkError(
            "The client socket has timed out after 1000ms while trying to connect to (10.0.0.9, 29500).\nException raised from ..."
        )

    monkeypatch.setattr(dist, "TCPStore", unreachable)
    launch = Launch("env", 0, 2, 0, "127.0.0.1", 29500)
    with pytest.raises(
        ConfigError,
        match=r"^job of RANK/WORLD_SIZE=2 variables: process 0 cannot open the job's store at MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 "
        r"\(The client socket has timed out after 1000ms .*\); export MASTER_ADDR=<an address of process 0's machine that the others reach> "
        r"and MASTER_PORT=<a free port> for every process$",
    ):
        join_store(launch, 1.0, datetime.timedelta(seconds=5))
    with pytest.raises(
        ConfigError,
        match=r"^SLURM job: MASTER_ADDR='a..b', the address of task 0, does not resolve .*in the job script, before srun$",
    ):
        join_store(Launch("slurm", 1, 2, 0, "a..b", 29500), 1.0, datetime.timedelta(seconds=5))


def test_a_job_port_in_use_is_one_line_naming_master_port():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        launch = Launch("slurm", 0, 2, 0, "127.0.0.1", busy.getsockname()[1])
        with pytest.raises(
            ConfigError,
            match=rf"SLURM job: port {launch.master_port} on 127.0.0.1 is in use .*; export MASTER_PORT=<a free port> in the job script",
        ):
            join_store(launch, 1.0, datetime.timedelta(seconds=5))
