"""A crash at any step of writing a best epoch's checkpoint, then ``--resume``: the run tests the
weights its best tracker names, and its final test equals an uninterrupted run's.

The store's file operations are numbered by ``tests/fixtures/kill_points.py``; a traced
uninterrupted run says which belong to each best epoch's checkpoint, and the run is killed
(SIGKILL) at each of them: in the middle of the file's bytes and before every rename
(the numbered file, its checksum, ``last.pt``, the validation's record, ``best.pt`` and their checksums).
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.forked_main import MainServer

pytestmark = pytest.mark.slow  # runs killed at every write, then resumed, in subprocesses

# 2 epochs, both new bests (val top-1 rises), so the second one replaces an existing best.pt
SETTINGS = [
    "train.epochs=2",
    "threads=1",
    "model.args.backbone_args={widths: [8, 16]}",
    "custom_imports=[tests.fixtures.kill_points]",
]
TIMEOUT = 180


@pytest.fixture(scope="module")
def server(main_server: MainServer) -> MainServer:
    """The 23 runs are processes forked from one that imported torch once (``tests/fixtures/forked_main.py``)."""
    return main_server


def run(server: MainServer, out: Path, *extra: str, env: Dict[str, str] = None) -> subprocess.CompletedProcess:
    args = [f"experiment.output_root={out}", "experiment.name=crash", *SETTINGS, *extra]
    return server.run(args, ROOT, {**subprocess_env(), **(env or {})}, TIMEOUT)


def final_test(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [line for line in proc.stdout.splitlines() if line.startswith("test:")][-1]


@pytest.fixture(scope="module")
def reference(server, tmp_path_factory) -> Tuple[str, List[Tuple[int, str, str]]]:
    """The uninterrupted run's test line and its numbered file operations."""
    out = tmp_path_factory.mktemp("reference")
    trace = out / "ops.txt"
    line = final_test(run(server, out, env={"REGTRAIN_TRACE_OPS": str(trace)}))
    ops = [(int(n), kind, name) for n, kind, name in (row.split() for row in trace.read_text().splitlines())]
    return line, ops


def best_saves(ops: List[Tuple[int, str, str]]) -> List[List[Tuple[int, str]]]:
    """For each checkpoint that links best.pt: (operation number, what) of its data write and renames."""
    saves: List[List[Tuple[int, str, str]]] = []
    for op in ops:
        if op[1] == "data":  # a checkpoint's operations start with its bytes
            saves.append([])
        saves[-1].append(op)
    return [
        [(n, f"{kind} {name}") for n, kind, name in save if kind in ("data", "replace")]
        for save in saves
        if any(name == "best.pt" for _, _, name in save)
    ]


def test_the_trace_covers_every_write_of_both_best_epochs(reference):
    saves = best_saves(reference[1])
    assert len(saves) == 2
    for epoch, save in enumerate(saves):
        name = f"epoch{epoch:04d}_batch000019.pt"  # the end of the epoch (of 19 batches)
        # the checkpoint first, then its validation's record, then best.pt
        assert [what for _, what in save] == [
            "data -",
            f"replace {name}.sha256",
            f"replace {name}",
            "replace last.pt",
            "replace last.pt.sha256",
            f"replace {name}.val.json",
            "replace best.pt",
            "replace best.pt.sha256",
        ]


def selected(ops: List[Tuple[int, str, str]]) -> List[Tuple[int, str]]:
    """Every point of the second best epoch (best.pt exists and must move), and the first
    one's best.pt rename (a crash there leaves no best.pt at all)."""
    first, second = best_saves(ops)
    return second + [(n, f"{what} (epoch 1)") for n, what in first if what == "replace best.pt"]


def kill_and_resume(
    server: MainServer, folder: Path, point: int
) -> Tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """A run SIGKILLed at file operation ``point``, then ``--resume`` in the same folder."""
    return run(server, folder, env={"REGTRAIN_KILL_AT": str(point)}), run(server, folder, "--resume")


FAULTS = ("raise", "kill")


def fail_validation_and_resume(
    server: MainServer, folder: Path, fault: str
) -> Tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """A run whose last validation raises or is SIGKILLed, then ``--resume`` in the same folder."""
    hook = [
        "custom_imports=[tests.fixtures.kill_points, tests.fixtures.validation_fault]",
        f"hooks=[{{name: validation_fault, epoch: 1, fault: {fault}}}]",
    ]
    failed = run(server, folder, *hook)
    # before the resume
    failed.left_behind = sorted(
        p.name for p in (folder / "crash" / "latest" / "checkpoints").glob("epoch0001_batch000019.pt*")
    )
    return failed, run(server, folder, "--resume")


@pytest.fixture(scope="module")
def killed(
    server, reference, tmp_path_factory
) -> Dict[str, Tuple[str, Path, subprocess.CompletedProcess, subprocess.CompletedProcess]]:
    """For each selected point (keys 0-8) and each validation fault (keys "raise", "kill"): what it is,
    its folder, the failed run and the resumed one. The runs are single threaded and independent, so
    two go at once (one per core)."""
    points = selected(reference[1])
    assert len(points) == 9, points
    cases = {
        **{
            index: (f"operation {point} ({what})", kill_and_resume, point) for index, (point, what) in enumerate(points)
        },
        **{fault: (f"validation {fault}", fail_validation_and_resume, fault) for fault in FAULTS},
    }
    folders = {key: tmp_path_factory.mktemp(f"killed_{key}") for key in cases}
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(fn, server, folders[key], arg) for key, (_, fn, arg) in cases.items()}
        return {key: (cases[key][0], folders[key], *futures[key].result()) for key in cases}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("index", range(9))
def test_killed_at_a_write_of_a_best_epoch_then_resumed_tests_the_named_best(reference, killed, index):
    what, _, killed_run, resumed = killed[index]
    assert killed_run.returncode == -9, f"not killed at {what}: {killed_run.stderr[-2000:]}"
    assert final_test(resumed) == reference[0], f"killed at {what}:\n{resumed.stderr[-3000:]}"
    best = re.search(r"testing (\S+)", resumed.stderr)
    assert best and os.path.basename(best.group(1)) in ("best.pt", "epoch0001_batch000019.pt"), resumed.stderr[-2000:]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("fault", FAULTS)
def test_a_failing_validation_loses_no_epoch_and_a_resume_runs_it_again(reference, killed, fault):
    """An exception, or SIGKILL, inside the validation of the last epoch: its checkpoint is on disk
    without a validation record; the resume validates it and tests what an uninterrupted run tests."""
    _, _, failed, resumed = killed[fault]
    assert failed.returncode == (1 if fault == "raise" else -9), failed.stderr[-2000:]
    assert (
        "epoch0001_batch000019.pt" in failed.left_behind
        and "epoch0001_batch000019.pt.val.json" not in failed.left_behind
    ), failed.left_behind
    assert "training state restored: epoch 2, step" in resumed.stderr
    assert final_test(resumed) == reference[0], resumed.stderr[-3000:]
