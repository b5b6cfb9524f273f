"""main.py under real launchers (gloo, CPU): training, exact evaluation, two nodes, failures."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Dict, List

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader, DistributedSampler

import main
from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, free_port, launch, run, torchrun
from tests.fixtures.metrics_rows import rows
from utils.amp import Amp
from utils.checkpoint.readers import load_file
from utils.config.load import load_config
from utils.config.schema import DistConfig
from utils.data import build_dataset
from utils.distributed.parallel import wrap_model
from utils.distributed.process_group import DistInfo
from utils.distributed.replicas import state_checksum
from utils.engine.evaluate import evaluate
from utils.errors import ConfigError
from utils.metrics import build_metric
from utils.model.build import build_network
from utils.model.criterion import build_criterion

# 32 per rank: the global batch of 2 ranks is the single-process default of 64
EPOCHS = 6
TRAIN = ["data.batch_size=32", f"train.epochs={EPOCHS}"]
ODD_TEST = "data.args.test_fraction=0.1997"  # 359 test images: divisible by neither 2 nor 3


def printed(stdout: str) -> List[Dict[str, float]]:
    return [
        {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.eE]+)", line)}
        for line in stdout.splitlines()
        if line.startswith("test: ")
    ]


def check_run(proc: subprocess.CompletedProcess, run_dir: Path, world_size: int) -> Dict[str, float]:
    """A finished N-rank training run: rank 0 alone reports and writes, and all ranks hold the same weights."""
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = printed(proc.stdout)  # printed once, by rank 0
    log = (run_dir / "log.txt").read_text()
    assert f"{world_size} process(es)" in log
    # other ranks log warnings and errors only
    assert not [line for line in proc.stderr.splitlines() if line.startswith("[rank") and " INFO " in line]
    epochs = [r["epoch"] for r in rows(run_dir) if r["split"] == "val"]
    assert epochs == sorted(set(epochs)), "one metrics row per evaluation, not one per rank"
    # every rank's weights and buffers hash to what rank 0 saved in last.pt
    digest = re.search(rf"replicas identical on {world_size} rank\(s\): sha256 ([0-9a-f]{{64}})", log)
    assert digest, log[-2000:]
    assert digest.group(1) == state_checksum(load_file(run_dir / "checkpoints" / "last.pt")["model"])
    return result


@pytest.fixture(scope="module")
def launched(tmp_path_factory) -> Path:
    """A 2-rank digits run under ``python -m torch.distributed.launch`` (it passes --local-rank=N)."""
    out = tmp_path_factory.mktemp("launch")
    proc = run(launch(2, f"experiment.output_root={out}", "experiment.name=launch", *TRAIN))
    result = check_run(proc, out / "launch" / "latest", 2)
    assert result["top1"] >= 0.95 and result["samples"] == 360
    return out / "launch" / "run_001"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_launch_trains_digits_on_two_ranks(launched):
    assert (launched / "checkpoints" / "best.pt").is_file()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_torchrun_trains_digits_with_cpu_sync_bn(tmp_path):
    proc = run(
        torchrun(2, f"experiment.output_root={tmp_path}", "experiment.name=syncbn", "model.sync_bn=true", *TRAIN)
    )
    result = check_run(proc, tmp_path / "syncbn" / "latest", 2)
    assert result["top1"] >= 0.95
    assert "BatchNorm layer(s) now CPUSyncBatchNorm" in (tmp_path / "syncbn" / "latest" / "log.txt").read_text()


def padded_control(checkpoint: Path, world_size: int) -> Dict[str, float]:
    """What summing per-rank sums over DistributedSampler slices would report (padding repeats samples)."""
    cfg = load_config(None, [ODD_TEST], base=load_file(checkpoint)["config"])
    model = build_network(cfg.model)
    model.load_state_dict(load_file(checkpoint)["model"])
    dataset = build_dataset(cfg.data, "test")
    correct = count = loss_sum = 0.0
    for rank in range(world_size):
        sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
        metric = build_metric(cfg.eval.metric)
        part = evaluate(
            model,
            DataLoader(dataset, batch_size=64, sampler=sampler),
            build_criterion(cfg.loss),
            metric,
            Amp(cfg.amp, torch.device("cpu")),
            torch.device("cpu"),
            show_progress=False,
        )
        correct += metric.sums["correct1"].item()
        count += metric.sums["count"].item()
        loss_sum += part["loss"] * part["samples"]
    return {"top1": correct / count, "loss": loss_sum / count, "samples": count}


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_evaluation_on_2_and_3_ranks_equals_one_process_on_an_odd_split(launched, tmp_path):
    best = launched / "checkpoints" / "best.pt"
    args = ["--mode", "test", "--checkpoint", str(best), ODD_TEST, f"experiment.output_root={tmp_path}"]
    assert main.main([*args, "experiment.name=single"]) == 0
    (single,) = rows(tmp_path / "single" / "test_001")  # test mode: a folder of its own
    assert single["samples"] == 359

    for world_size in (2, 3):
        proc = run(torchrun(world_size, *args, f"experiment.name=ranks{world_size}"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert len(printed(proc.stdout)) == 1
        (got,) = rows(tmp_path / f"ranks{world_size}" / "test_001")  # one row: only rank 0 writes
        assert got["samples"] == single["samples"]
        assert set(got) == set(single)
        for key, value in single.items():
            if isinstance(value, float):
                assert abs(got[key] - value) <= 1e-6, (world_size, key, got[key], value)

        control = padded_control(best, world_size)
        assert control["samples"] == 360  # a padded sampler evaluates a repeated image
        assert max(abs(control["top1"] - single["top1"]), abs(control["loss"] - single["loss"])) > 1e-6


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_torchrun_agents_resume_the_launched_run_as_two_nodes(launched, tmp_path):
    """``torchrun --nnodes=2 --node_rank=K --master_addr --master_port`` on loopback: the two
    nodes resume the 2-rank run for one more epoch, accumulating gradients over 2 micro-batches
    (DDP no_sync). The replica check shows both ranks loaded the same state and stayed identical."""
    run_dir = tmp_path / "launch" / "run_001"
    shutil.copytree(launched, run_dir)
    epochs = EPOCHS
    port = free_port()
    args = [
        "--resume",  # a finished run: continued when named
        str(run_dir),
        f"experiment.output_root={tmp_path}",
        "experiment.name=launch",
        *TRAIN,
        f"train.epochs={epochs + 1}",
        "train.accumulate=2",
    ]
    procs = [
        subprocess.Popen(
            [
                PYTHON,
                "-m",
                "torch.distributed.run",
                "--nnodes=2",
                "--nproc_per_node=1",
                f"--node_rank={k}",
                "--master_addr=127.0.0.1",
                f"--master_port={port}",
                "main.py",
                *args,
            ],
            cwd=ROOT,
            env=subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in (0, 1)
    ]
    try:
        outputs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            p.kill()
    for k, (p, (_, err)) in enumerate(zip(procs, outputs)):
        assert p.returncode == 0, f"node {k}: {err[-3000:]}"
    resumed = (run_dir / "log.txt").read_text().split("resumed from")
    assert len(resumed) == 2 and f"(epoch {epochs})" in resumed[1]
    assert re.search(r"replicas identical on 2 rank\(s\)", resumed[1])
    assert [r["epoch"] for r in rows(run_dir) if r["split"] == "val"] == list(range(epochs + 1))
    assert torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)["progress"]["epoch"] == epochs + 1


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_failing_rank_ends_the_job_instead_of_hanging(tmp_path):
    """Rank 1 raises at its third step while a non-daemon thread of it is still running
    (as a blocked loader thread would be); rank 0 is inside a collective. Before the
    fail-fast exit, rank 1 waited for that thread forever and the job hung."""
    proc = run(
        torchrun(
            2,
            f"experiment.output_root={tmp_path}",
            "custom_imports=[tests.fixtures.faulty_net]",
            "model.name=faulty_classifier",
            "model.args={num_classes: 10, linger: true}",
            "train.epochs=1",
        ),
        timeout=180,
    )
    assert proc.returncode != 0
    assert "injected failure on rank 1 at step 3" in proc.stderr  # and run() raised no TimeoutExpired


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_rank_with_bad_input_is_named_as_the_root_cause_by_torchrun(tmp_path):
    """Only rank 1's data folder is missing. Its peer fails a moment later in a collective
    (the connection closed); torchrun names the failure with the earliest second, on a tie
    the lowest rank it saw exit in the same poll, which used to be rank 0."""
    root = tmp_path / "data"
    for split in ("train", "val", "test"):
        for label in ("a", "b"):
            (root / "rank0" / split / label).mkdir(parents=True)
            for i in range(4):
                Image.fromarray(np.full((8, 8, 3), 60 * i, dtype=np.uint8)).save(
                    root / "rank0" / split / label / f"{i}.png"
                )
    # a poll every second (default 0.1 s) puts both exits in one poll, as on a busy launcher
    launcher = torchrun(2)
    launcher.insert(launcher.index("main.py"), "--monitor-interval=1")
    proc = run(
        [
            *launcher,
            f"experiment.output_root={tmp_path / 'out'}",
            "custom_imports=[tests.fixtures.rank_data]",
            "data.name=rank_image_folder",
            f"data.root={root}/rank{{rank}}",
            "data.args={missing_after_s: 3}",
            "model.input_size=[3,8,8]",
            "data.batch_size=2",
            "model.args={num_classes: 2, backbone: small_cnn, backbone_args: {in_channels: 3, widths: [8]}}",
            "train.epochs=1",
        ],
        timeout=180,
    )
    assert proc.returncode != 0
    assert f"[rank1] error: data folder '{root}/rank1/train' does not exist" in proc.stderr, proc.stderr[-3000:]
    root_cause = proc.stderr.split("Root Cause (first observed failure):", 1)[-1]
    assert re.search(r"rank\s*: 1 \(local_rank: 1\)", root_cause) and "DataError" in root_cause, proc.stderr[-3000:]


def test_wrapping_modes_in_one_process():
    model = torch.nn.Linear(2, 2)
    assert wrap_model(model, DistConfig(), DistInfo()) is model  # no process group: no wrapper
    assert wrap_model(model, DistConfig(mode="dp"), DistInfo()) is model  # dp without several GPUs
    with pytest.raises(ConfigError, match="dist.mode=ddp"):
        wrap_model(model, DistConfig(mode="dp"), DistInfo(world_size=2))
    try:
        import apex.parallel  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="apex.parallel"):
            wrap_model(model, DistConfig(mode="apex"), DistInfo(world_size=2))


def test_torchrun_s_summary_gets_bad_input_as_its_line_and_a_bug_with_its_traceback(tmp_path, monkeypatch):
    """A rank stopped by bad input printed its error line, then torchrun's summary printed 20 lines of the
    framework's frames for it; a bug keeps its traceback there."""
    import json

    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    from utils.distributed.process_group import record_failure
    from utils.errors import DataError

    monkeypatch.setenv("TORCHELASTIC_ERROR_FILE", str(tmp_path / "error.json"))
    for err in (DataError("data folder 'x' does not exist"), ValueError("a bug")):
        try:
            raise err
        except Exception as caught:
            record_failure(caught)
        failure = ProcessFailure(local_rank=1, pid=1, exitcode=2, error_file=str(tmp_path / "error.json"))
        shown = failure.message.get("extraInfo", {}).get("py_callstack", failure.message["message"])
        if isinstance(err, DataError):
            assert shown == "DataError: data folder 'x' does not exist", json.loads(
                (tmp_path / "error.json").read_text()
            )
        else:
            assert shown.startswith("Traceback (most recent call last):") and "ValueError: a bug" in shown
