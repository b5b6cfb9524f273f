"""``dist.mode=fsdp`` under real torchrun (2 CPU processes, gloo): FSDP2 equals DDP, sharded checkpoints reshard.

One module-scoped pair of runs on digits (SyncBN, global batch 24, one epoch of 52 SGD steps, a
checkpoint every 3 steps), DDP and FSDP, each launched once:

- their checkpoints after 3 steps: the same weights (1e-5);
- the epoch: the same weights and test accuracy;
- the FSDP run's folder, cut back to its mid-epoch checkpoint at batch 30 (the next directory left
  without ``.metadata``, as a kill during its write leaves it), resumed on 3 ranks: the global
  batches and the step count of the uninterrupted run;
- ``--mode test`` in one process on the FSDP run's best sharded checkpoint: the run's test line.

And an FSDP run without SyncBN (each rank's BatchNorm statistics its own), uninterrupted and killed
(-9) after its first validation then resumed: the same test line and weights, and ``--mode test`` of
each epoch's checkpoint on the val split prints that checkpoint's validation record.
"""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict

import pytest
import torch

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import RECORDED_DIGITS, global_batches, run, torchrun
from utils.checkpoint.state import Checkpoint

pytestmark = pytest.mark.slow  # torchrun jobs shared by every test

GLOBAL = 24
SETTINGS = [
    *RECORDED_DIGITS,
    f"data.global_batch_size={GLOBAL}",
    "train.epochs=1",
    "train.checkpoint_every_steps=3",
    "train.keep_checkpoints=20",  # all 17 of the epoch: the test reads the first, the resume cuts back to the tenth
    "train.log_every=50",
    "optim.name=sgd",
    "optim.lr=0.1",
    "schedule.name=constant",
    "schedule.warmup_epochs=0",
]
TIMEOUT = 180
ATOL = 1e-5  # 3 SGD steps: the ranks' gradients are averaged in another order, nothing else differs
# After 52 steps with momentum those bits have grown: 3e-7 measured, 1e-6 for the run resumed on 3 ranks;
# a repeated or skipped batch moves the weights by ~1e-2.
LONG_ATOL = 1e-5


def launch(nproc: int, out: Path, record: Path, *extra: str, kill_at: int = 0) -> subprocess.CompletedProcess:
    """A run of ``nproc`` processes; ``kill_at``: rank 0 SIGKILLs the whole job at that training read."""
    args = [f"experiment.output_root={out}", "experiment.name=run", *SETTINGS, *extra]
    cmd = torchrun(nproc, *args)
    if kill_at:  # real processes: rank 0 kills its launcher's process group
        env = subprocess_env()
        env.pop("TORCHELASTIC_ERROR_FILE", None)
        env.update({"REGTRAIN_RECORD": str(record), "REGTRAIN_KILL_AT": str(kill_at)})
        done = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
        )
    else:  # the ranks forked from the worker's main.py server
        done = run(cmd, TIMEOUT, {"REGTRAIN_RECORD": str(record)})
    (out.parent / f"{out.name}.stderr").write_text(done.stderr)
    assert (done.returncode != 0) if kill_at else (done.returncode == 0), done.stderr[-3000:]
    return done


def the_test_line(done: subprocess.CompletedProcess) -> str:
    return next(line for line in done.stdout.splitlines() if line.startswith("test: "))


def line_of_test_mode(capsys: pytest.CaptureFixture, out: Path, *extra: str) -> str:
    """The test line of ``--mode test`` run in this process (one process needs no launcher of its own)."""
    import main

    capsys.readouterr()
    assert main.main([f"experiment.output_root={out}", "experiment.name=run", *SETTINGS, *extra]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith("test: "))


def weights(path: Path) -> Dict[str, torch.Tensor]:
    return Checkpoint.load(path).model_weights


def worst(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, object]:
    tmp = tmp_path_factory.mktemp("fsdp")
    with ThreadPoolExecutor(max_workers=2) as pool:  # independent jobs side by side: each waits on its ranks' startup
        done = {mode: pool.submit(launch, 2, tmp / mode, tmp / mode, f"dist.mode={mode}") for mode in ("ddp", "fsdp")}
    return {"tmp": tmp, **{mode: job.result() for mode, job in done.items()}}


@pytest.mark.timeout(600)
def test_fsdp_equals_ddp_after_three_sgd_steps(runs):
    tmp: Path = runs["tmp"]
    third = "run/latest/checkpoints/epoch0000_batch000003"
    ddp, fsdp = weights(tmp / f"ddp/{third}.pt"), weights(tmp / f"fsdp/{third}.dcp")
    assert worst(ddp, fsdp) <= ATOL
    assert Checkpoint.load(tmp / f"fsdp/{third}.dcp").progress.step == 3


@pytest.mark.timeout(600)
def test_fsdp_trains_digits_as_ddp_does(runs):
    tmp: Path = runs["tmp"]
    ddp_line, fsdp_line = the_test_line(runs["ddp"]), the_test_line(runs["fsdp"])
    top1 = {name: float(line.split("top1=")[1].split()[0]) for name, line in (("ddp", ddp_line), ("fsdp", fsdp_line))}
    # learned (chance 0.1): one epoch of SGD at lr 0.1 scores 0.25 to 0.76 over seeds 0 to 5, both epoch orders
    assert top1["fsdp"] >= 0.2 and abs(top1["fsdp"] - top1["ddp"]) <= 0.01, (
        ddp_line,
        fsdp_line,
    )
    assert (
        worst(
            weights(tmp / "ddp/run/latest/checkpoints/last.pt"), weights(tmp / "fsdp/run/latest/checkpoints/last.dcp")
        )
        <= LONG_ATOL
    )
    assert global_batches(tmp / "fsdp", 2, GLOBAL) == global_batches(tmp / "ddp", 2, GLOBAL)


@pytest.mark.timeout(600)
def test_sharded_checkpoint_resumes_on_three_ranks_in_the_global_order(runs):
    tmp: Path = runs["tmp"]
    out = tmp / "on3"
    shutil.copytree(tmp / "fsdp", out, symlinks=True)
    checkpoints = out / "run" / "latest" / "checkpoints"
    for later in [*(f"epoch0000_batch{b:06d}.dcp" for b in range(36, 52, 3)), "epoch0000_batch000052.dcp"]:
        shutil.rmtree(checkpoints / later)
        (checkpoints / f"{later}.val.json").unlink(missing_ok=True)
    (checkpoints / "epoch0000_batch000033.dcp" / ".metadata").unlink()  # killed while writing it: skipped
    metrics = out / "run" / "latest" / "metrics.jsonl"  # killed before its test: no test row (a bare --resume)
    metrics.write_text("".join(row for row in metrics.read_text().splitlines(True) if '"split": "test"' not in row))
    resumed = launch(3, out, tmp / "resumed3", "dist.mode=fsdp", "--resume")
    assert "world size 2 -> 3" in resumed.stderr
    assert "skipping 1 unusable checkpoint" in resumed.stderr

    reference = global_batches(tmp / "fsdp", 2, GLOBAL)
    order = reference[:30] + global_batches(tmp / "resumed3", 3, GLOBAL)
    assert order == reference and len(order) == 52
    final = Checkpoint.load(checkpoints / "last.dcp")
    assert final.progress.step == 52 == Checkpoint.load(tmp / "fsdp/run/latest/checkpoints/last.dcp").progress.step
    assert worst(final.model_weights, weights(tmp / "fsdp/run/latest/checkpoints/last.dcp")) <= LONG_ATOL


@pytest.mark.timeout(300)
def test_test_mode_reads_a_sharded_checkpoint_in_one_process(runs, capsys):
    tmp: Path = runs["tmp"]
    best = tmp / "fsdp/run/latest/checkpoints/best.dcp"
    assert line_of_test_mode(capsys, tmp / "tested", "--mode", "test", "--checkpoint", str(best)) == the_test_line(
        runs["fsdp"]
    )


def test_convert_writes_one_ordinary_file(runs, capsys):
    from utils.checkpoint.convert import main as convert

    tmp: Path = runs["tmp"]
    sharded = Checkpoint.load(tmp / "fsdp/run/latest/checkpoints/last.dcp")
    assert convert([str(sharded.source), str(tmp / "last.pt")]) == 0
    single = Checkpoint.load(tmp / "last.pt")  # its checksum checked
    assert single.shards is None and single.progress == sharded.progress
    assert worst(single.model_weights, sharded.model_weights) == 0
    assert len(single.optimizer_state()["state"]) == len(single.model_weights) - sum(
        "running" in k or "num_batches" in k for k in single.model_weights
    )
    assert convert([str(tmp / "last.pt"), str(tmp / "again.pt")]) == 2
    assert capsys.readouterr().err.startswith("error: ")


UNSYNCED = ("dist.mode=fsdp", "model.sync_bn=false", "train.epochs=2")
STEPS = 52  # of one epoch


@pytest.fixture(scope="module")
def unsynced(tmp_path_factory) -> Dict[str, object]:
    """FSDP without SyncBN for 2 epochs: uninterrupted, and killed in the first step of epoch 2 (its
    validation done and recorded, every rank then on rank 0's statistics), then resumed."""
    tmp = tmp_path_factory.mktemp("fsdp_unsynced")
    with ThreadPoolExecutor(max_workers=2) as pool:  # the uninterrupted run beside the killed one
        full = pool.submit(launch, 2, tmp / "full", tmp / "full", *UNSYNCED)
        launch(2, tmp / "killed", tmp / "killed", *UNSYNCED, kill_at=STEPS * GLOBAL // 2 + 5)
        resumed = launch(2, tmp / "killed", tmp / "resumed", *UNSYNCED, "--resume")
        full = full.result()
    return {"tmp": tmp, "full": full, "resumed": resumed}


@pytest.mark.timeout(600)
def test_fsdp_kill_and_resume_is_exact_without_syncbn(unsynced):
    tmp: Path = unsynced["tmp"]
    assert f"training state restored: epoch 1, step {STEPS}" in unsynced["resumed"].stderr
    assert the_test_line(unsynced["resumed"]) == the_test_line(unsynced["full"])
    assert (
        worst(
            weights(tmp / "killed/run/latest/checkpoints/last.dcp"),
            weights(tmp / "full/run/latest/checkpoints/last.dcp"),
        )
        == 0
    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("epoch", [1, 2])
def test_a_sharded_checkpoint_holds_what_its_validation_scored(unsynced, epoch, capsys):
    from utils.checkpoint.records import read_record
    from utils.log import format_metrics

    tmp: Path = unsynced["tmp"]
    # the end of the epoch-th epoch, numbered from 0 as the log numbers it
    checkpoint = tmp / f"full/run/latest/checkpoints/epoch{epoch - 1:04d}_batch{STEPS:06d}.dcp"
    line = line_of_test_mode(
        capsys, tmp / f"val{epoch}", *UNSYNCED, "--mode", "test", "--checkpoint", str(checkpoint), "data.test_split=val"
    )
    assert line == "test: " + format_metrics(read_record(checkpoint).metrics)
