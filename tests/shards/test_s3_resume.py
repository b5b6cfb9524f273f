"""Exactness from S3: a 2-rank run killed mid-epoch and resumed on 3 ranks sees the uninterrupted run's global batches
(in the shard-window order, ``data.args.shuffle_window=2``, through a 300 KB cache of 100 KB shards)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import main
from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, torchrun

GLOBAL = 48  # 26 steps per epoch of the 1,257 training digits; 24 per rank on 2, 16 on 3
TIMEOUT = 300


def launch(nproc: int, out: Path, url: str, *extra: str, kill_at: int = 0) -> subprocess.CompletedProcess:
    args = [f"experiment.output_root={out}", "experiment.name=run", "threads=1", "train.record_samples=true"]
    args += ["custom_imports=[tests.shards.killing_shards]", "data.name=killing_shards", f"data.root={url}"]
    args += [f"data.args={{cache_dir: '{out / 'cache'}', cache_limit: 300KB, shuffle_window: 2}}"]
    args += [f"data.global_batch_size={GLOBAL}"]
    args += ["data.prefetch=none", "train.epochs=1", "train.checkpoint_every_steps=4", "train.log_every=3"]
    args += ["model.args.backbone_args={widths: [8, 16]}", *extra]
    cmd = torchrun(nproc, *args) if nproc > 1 else [PYTHON, "main.py", *args]
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env["REGTRAIN_KILL_AT"] = str(kill_at)
    # a session of its own: the kill takes the launcher's whole process group, never pytest
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_killed_on_two_ranks_and_resumed_on_three_the_global_batches_are_the_uninterrupted_ones(
    tmp_path, capsys, s3_env
):
    url = f"s3://{s3_env.bucket()}/digits"
    assert main.main(["--mode", "pack", "--output", url, "--shard-size", "100KB", "data.name=digits"]) == 0
    out = tmp_path / "two"
    with ThreadPoolExecutor(max_workers=1) as pool:  # the uninterrupted run beside the killed one
        uninterrupted = pool.submit(launch, 1, tmp_path / "one", url)
        killed = launch(2, out, url, kill_at=7 * GLOBAL // 2 + 1)  # rank 0 dies reading step 8's first sample
        whole = uninterrupted.result()
    assert whole.returncode == 0, (whole.stdout + whole.stderr)[-3000:]
    expected = (tmp_path / "one" / "run" / "latest" / "samples.jsonl").read_text()
    assert killed.returncode != 0, (killed.stdout + killed.stderr)[-3000:]
    resumed = launch(3, out, url, "--resume")
    assert resumed.returncode == 0, (resumed.stdout + resumed.stderr)[-3000:]
    assert (out / "run" / "latest" / "samples.jsonl").read_text() == expected
    rows = [json.loads(line) for line in expected.splitlines()]
    seen = [key for row in rows for key in row["keys"]]
    # data.drop_last (the default): 26 full global batches, no sample twice, the 9 left over dropped
    assert len(rows) == 1257 // GLOBAL and len(seen) == len(set(seen)) == 1257 // GLOBAL * GLOBAL
