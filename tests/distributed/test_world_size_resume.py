"""A run keeps its global data order across a change of world size (``data.global_batch_size``).

A 2-rank torchrun run on digits (SyncBN, no dropout, global batch 24) is SIGKILLed in
the middle of its first epoch and resumed on 3 ranks, and on 1 rank. A test-only
dataset records every training index each rank reads: across the kill, every epoch
reads each sample exactly once, in the global batches of the uninterrupted 2-rank run;
step count, LR and schedule match it, and the final weights equal it to float tolerance
(the ranks' partial sums are added in another order, nothing else differs).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Dict

import pytest
import torch

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, RECORDED_DIGITS, global_batches, run, torchrun
from utils.checkpoint.state import Checkpoint
from utils.checkpoint.store import CheckpointStore
from utils.data.datasets.digits import Digits

pytestmark = pytest.mark.slow  # torchrun jobs on several world sizes

GLOBAL = 24
EVERY = 10  # a checkpoint every 10 steps
KILL_BATCH = 35  # rank 0 is killed reading batch 35 of epoch 0: the newest checkpoint is at batch 30
SETTINGS = [
    *RECORDED_DIGITS,
    f"data.global_batch_size={GLOBAL}",
    "train.epochs=2",
    f"train.checkpoint_every_steps={EVERY}",
]
TIMEOUT = 240
# Summing per-rank gradients (and SyncBN statistics) in another order changes the last bits;
# 104 AdamW steps carry that to 1.4e-7 here (measured). The tolerance leaves a wide margin below any
# real difference (one repeated or skipped batch moves weights by ~1e-2).
ATOL = 1e-5


def launch(nproc: int, out: Path, record: Path, *extra: str, kill_at: int = 0) -> subprocess.CompletedProcess:
    args = [f"experiment.output_root={out}", "experiment.name=run", *SETTINGS, *extra]
    cmd = torchrun(nproc, *args) if nproc > 1 else [PYTHON, "main.py", *args]
    if not kill_at:  # its processes forked from the worker's main.py server
        return run(cmd, TIMEOUT, {"REGTRAIN_RECORD": str(record)})
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env.update({"REGTRAIN_RECORD": str(record), "REGTRAIN_KILL_AT": str(kill_at)})
    # a session of its own: the kill takes the launcher's whole process group, never pytest
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
    )


def final(run: Path) -> Dict[str, object]:
    data = torch.load(run / "checkpoints" / "last.pt", weights_only=False)
    return {
        "model": data["model"],
        "step": data["progress"]["step"],
        "scheduler": data["scheduler"],
        "lrs": [g["lr"] for g in data["optimizer"]["param_groups"]],
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Dict[str, object]:
    """The uninterrupted 2-rank run, and a 2-rank run killed mid-epoch (its folder and records)."""
    tmp = tmp_path_factory.mktemp("world")
    done = launch(2, tmp / "ref", tmp / "ref")
    assert done.returncode == 0, done.stderr[-3000:]
    killed = launch(2, tmp / "killed", tmp / "killed", kill_at=KILL_BATCH * GLOBAL // 2 + 1)
    assert killed.returncode != 0, killed.stderr[-3000:]
    newest = CheckpointStore(tmp / "killed" / "run" / "latest" / "checkpoints").latest_usable()
    assert newest is not None, killed.stderr[-3000:]
    progress = Checkpoint.load(newest).progress
    assert (progress.epoch, progress.batch) == (0, EVERY * (KILL_BATCH // EVERY)), progress  # mid-epoch, as intended
    per_epoch = len(Digits("train")) // GLOBAL
    consumed = global_batches(tmp / "killed", 2, GLOBAL)[: progress.epoch * per_epoch + progress.batch]
    return {
        "tmp": tmp,
        "reference": global_batches(tmp / "ref", 2, GLOBAL),
        "before": consumed,
        "per_epoch": per_epoch,
        "final": final(tmp / "ref" / "run" / "latest"),
    }


@pytest.mark.timeout(600)
@pytest.mark.parametrize("world_size", [3, 1])
def test_resume_on_another_world_size_continues_the_global_order(runs, world_size):
    tmp: Path = runs["tmp"]
    out = tmp / f"on{world_size}"
    shutil.copytree(tmp / "killed", out, symlinks=True)
    resumed = launch(world_size, out, tmp / f"resumed{world_size}", "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "world size 2 -> %d" % world_size in resumed.stderr

    order = runs["before"] + global_batches(tmp / f"resumed{world_size}", world_size, GLOBAL)
    assert order == runs["reference"]  # the same global batches, in the same order, rank slices included
    per_epoch = runs["per_epoch"]
    assert len(order) == 2 * per_epoch
    for epoch in range(2):
        seen = [i for batch in order[epoch * per_epoch : (epoch + 1) * per_epoch] for i in batch]
        # each sample at most once; only the incomplete last global batch is left out
        assert len(seen) == len(set(seen)) == per_epoch * GLOBAL, epoch

    mine, ref = final(out / "run" / "latest"), runs["final"]
    assert mine["step"] == ref["step"] == 2 * per_epoch
    assert mine["scheduler"]["last_epoch"] == ref["scheduler"]["last_epoch"]
    assert mine["lrs"] == pytest.approx(ref["lrs"], rel=1e-12)
    worst = max((mine["model"][k].float() - ref["model"][k].float()).abs().max().item() for k in ref["model"])
    assert worst <= ATOL, f"weights differ by {worst:.3g} after resuming on {world_size} rank(s)"
