"""Exact resume: a run killed at a random step (mid-epoch included) and resumed ends
bit-identical to an uninterrupted run, in one process and in 2 gloo processes; a
killed rank under ``torchrun --max-restarts=1`` and SIGTERM preemption too."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Union

import pytest
import torch

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, free_port
from tests.fixtures.forked_main import ForkedRun, MainServer
from tests.fixtures.harness import tensorboard
from tests.fixtures.metrics_rows import rows
from utils.distributed.preempt import PREEMPTED_EXIT

pytestmark = pytest.mark.slow  # every test kills and resumes real processes

# Dropout and a random crop draw from the global generators at every step: a resume that
# did not restore them would diverge. 3 epochs of 22 steps, a checkpoint every 4 steps.
SETTINGS = [
    "train.epochs=3",
    "data.batch_size=64",
    "data.prefetch=none",
    "model.args.backbone_args={widths: [8, 16]}",
    "model.args.dropout=0.3",
    "data.train_transforms=[{name: RandomCrop, size: 8, padding: 1}]",
    "train.checkpoint_every_steps=4",
    "train.keep_checkpoints=3",
]
TIMEOUT = 240
# The kill points are random but reproducible: each test draws from (seed, its name). Another
# seed explores other points: REGTRAIN_KILL_SEED=7 python -m pytest tests/...
SEED = int(os.environ.get("REGTRAIN_KILL_SEED", "20261122"))


def kill_point(test: str, low: int, high: int) -> int:
    """How many checkpoints to wait for before killing (reported by every failure)."""
    return random.Random(f"{SEED}/{test}").randint(low, high)


def run_env() -> Dict[str, str]:
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    return env


@pytest.fixture(scope="module")
def server(main_server: MainServer) -> MainServer:
    """The one-process runs are ``python main.py`` processes forked from one that imported torch once."""
    return main_server


def single(server: MainServer, out: Path, name: str, *extra: str) -> ForkedRun:
    """``python main.py`` of the settings, in a session of its own (forked: ``tests/fixtures/forked_main.py``)."""
    args = [f"experiment.output_root={out}", f"experiment.name={name}", *SETTINGS, *extra]
    return server.start(args, ROOT, run_env(), TIMEOUT)


def torchrun(out: Path, name: str, *extra: str, restarts: int = 0) -> List[str]:
    # The c10d rendezvous opens a new round on a restart (the static one would reuse stale
    # gloo addresses of the dead round).
    return [
        PYTHON,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--max-restarts={restarts}",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "main.py",
        f"experiment.output_root={out}",
        f"experiment.name={name}",
        *SETTINGS,
        *extra,
    ]


def start(cmd: List[str]) -> subprocess.Popen:
    return subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=run_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def finish(proc: Union[subprocess.Popen, ForkedRun], expect: int = 0) -> str:
    """Its output (stdout, then stderr) once it exited with ``expect``."""
    try:
        if isinstance(proc, ForkedRun):
            done = proc.wait(TIMEOUT)
            out = done.stdout + done.stderr
        else:
            out, _ = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired as hung:
        if isinstance(proc, ForkedRun):  # killed by wait
            out = (hung.stdout or "") + (hung.stderr or "")
        else:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        pytest.fail(f"run hung:\n{out[-3000:]}")
    assert proc.returncode == expect, out[-3000:]
    return out


def printed(proc: Union[subprocess.Popen, ForkedRun]) -> str:
    """What an ended run printed (stdout, then stderr)."""
    return "".join(proc.output()) if isinstance(proc, ForkedRun) else proc.stdout.read()


def numbered(experiment: Path) -> List[Path]:
    folder = experiment / "latest" / "checkpoints"
    return sorted(folder.glob("epoch*_batch*.pt")) if folder.is_dir() else []


def wait_for_checkpoints(proc: Union[subprocess.Popen, ForkedRun], experiment: Path, count: int) -> None:
    """Block until ``count`` numbered checkpoints were written (the run keeps going meanwhile)."""
    seen: set = set()
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < count:
        assert proc.poll() is None, f"the run ended before {count} checkpoints:\n{printed(proc)[-3000:]}"
        assert time.monotonic() < deadline, "no checkpoint in time"
        seen.update(p.name for p in numbered(experiment))
        time.sleep(0.005)


def outcome(experiment: Path) -> Dict[str, object]:
    """Final weights (and EMA), optimizer state, every val and test row of the experiment's run, and every
    ``train/loss`` TensorBoard holds: a resumed run writes each row and log step once, with the uninterrupted
    run's values (the kills fall between log steps: a checkpoint every 4 steps, a log step every 10)."""
    run = experiment / "latest"
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=False, map_location="cpu")  # GPU runs too
    recorded = rows(run)
    return {
        "model": state["model"],
        "optimizer": state["optimizer"]["state"],
        "step": state["progress"]["step"],
        "rows": recorded,
        "train_loss": [(e.step, e.value) for e in tensorboard(run).Scalars("train/loss")],
    }


def assert_identical(a: Dict[str, object], b: Dict[str, object], point: str) -> None:
    """``a`` equals ``b`` bit for bit; ``point`` (where the run was killed) is in every failure."""
    assert a["step"] == b["step"], point
    assert a["model"].keys() == b["model"].keys(), point
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), (point, key)
    for index in a["optimizer"]:
        for name, value in a["optimizer"][index].items():
            assert torch.equal(torch.as_tensor(value), torch.as_tensor(b["optimizer"][index][name])), (
                point,
                index,
                name,
            )
    assert a["rows"] == b["rows"], point
    assert a["train_loss"] == b["train_loss"], point


def killed_at(count: int) -> str:
    return f"killed after {count} checkpoint(s) (REGTRAIN_KILL_SEED={SEED})"


@pytest.fixture(scope="module")
def reference(server, tmp_path_factory) -> Dict[str, object]:
    out = tmp_path_factory.mktemp("reference")
    finish(single(server, out, "ref"))
    return outcome(out / "ref")


@pytest.fixture(scope="module")
def reference_2ranks(tmp_path_factory) -> Dict[str, object]:
    out = tmp_path_factory.mktemp("reference2")
    finish(start(torchrun(out, "ref")))
    return outcome(out / "ref")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("writes", ["sync", "async"])
def test_sigkill_at_a_random_step_then_resume_is_bit_identical(tmp_path, server, reference, writes):
    """Also with train.async_checkpoint: a kill while the background thread writes leaves the previous checkpoint."""
    # a point of the first 2 epochs, often mid-epoch
    count = kill_point(f"sigkill/{writes}" if writes == "async" else "sigkill", 1, 10)
    mode = f"train.async_checkpoint={writes == 'async'}".lower()
    proc = single(server, tmp_path, "killed", mode)
    wait_for_checkpoints(proc, tmp_path / "killed", count)
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=30).returncode == -signal.SIGKILL
    resumed = finish(single(server, tmp_path, "killed", mode, "--resume"))
    assert "training state restored" in resumed, killed_at(count)
    assert_identical(outcome(tmp_path / "killed"), reference, killed_at(count))


@pytest.mark.timeout(600)
def test_two_rank_job_killed_and_resumed_is_bit_identical(tmp_path, reference_2ranks):
    count = kill_point("two ranks", 2, 8)
    proc = start(torchrun(tmp_path, "killed"))
    wait_for_checkpoints(proc, tmp_path / "killed", count)
    kill_job(proc)
    resumed = finish(start(torchrun(tmp_path, "killed", "--resume")))
    assert "training state restored" in resumed, killed_at(count)
    assert_identical(outcome(tmp_path / "killed"), reference_2ranks, killed_at(count))


def kill_job(launcher: subprocess.Popen) -> None:
    """SIGKILL a torchrun job: its ranks, which torchrun starts in sessions of their own (the launcher's process
    group does not hold them: killed alone, they train on to the end), then the launcher."""
    for pid in worker_pids(launcher.pid):
        os.kill(pid, signal.SIGKILL)
    os.killpg(launcher.pid, signal.SIGKILL)
    launcher.wait(timeout=30)


def worker_pids(launcher: int) -> List[int]:
    """The training processes under a torchrun launcher (those running main.py)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == launcher and b"main.py" in cmdline:
                pids.append(int(entry.name))
    return pids


@pytest.mark.timeout(600)
def test_a_killed_rank_restarts_under_max_restarts_and_ends_identical(tmp_path, reference_2ranks):
    proc = start(torchrun(tmp_path, "restart", "train.auto_resume=true", restarts=1))
    count = kill_point("max restarts", 2, 6)
    wait_for_checkpoints(proc, tmp_path / "restart", count)
    workers = worker_pids(proc.pid)
    assert len(workers) == 2, workers
    os.kill(max(workers), signal.SIGKILL)  # one rank dies; torchrun restarts the group
    finish(proc)
    assert "training state restored" in (tmp_path / "restart" / "latest" / "log.txt").read_text(), killed_at(count)
    assert_identical(outcome(tmp_path / "restart"), reference_2ranks, killed_at(count))


@pytest.mark.timeout(600)
def test_sigterm_checkpoints_exits_with_the_preemption_code_and_resumes_identically(tmp_path, server, reference):
    proc = single(server, tmp_path, "term")
    wait_for_checkpoints(proc, tmp_path / "term", 2)
    proc.send_signal(signal.SIGTERM)
    out = finish(proc, expect=PREEMPTED_EXIT)
    assert "received SIGTERM" in out and "stopped: stopped by SIGTERM" in out
    finish(single(server, tmp_path, "term", "--resume"))
    assert_identical(outcome(tmp_path / "term"), reference, "SIGTERM after 2 checkpoints")
