"""``train.record_samples=true``: ``samples.jsonl`` names the samples of every step's global batch.

One line per optimizer step, the keys of the whole global batch in rank order, computed by rank 0
from the sampler's order. Checked against what the ranks really read (``tests/fixtures/recorded_digits.py``),
across world sizes, and across a kill -9 and ``--resume`` (the file is cut back to the checkpoint's step).
"""

from __future__ import annotations

import json
import logging
import subprocess
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import DataLoader

import main
from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, RECORDED_DIGITS, global_batches, run, torchrun
from utils.config.load import load_config
from utils.config.resume import field_rules
from utils.config.schema import Config
from utils.data.datasets.digits import Digits
from utils.data.identity import sample_keys
from utils.data.sample_order import epoch_batches_of_all_ranks
from utils.data.samplers import GlobalBatchSampler, ResumableSampler
from utils.data.string_table import StringTable
from utils.engine.sample_record import SampleRecorder
from utils.errors import ConfigError

SMALL = ["model.args.backbone_args={widths: [8, 16]}", "threads=1", "train.record_samples=true"]
TIMEOUT = 240


def lines(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def train(tmp_path: Path, *extra: str) -> Path:
    assert main.main([f"experiment.output_root={tmp_path}", "experiment.name=run", *SMALL, *extra]) == 0
    return tmp_path / "run" / "latest" / "samples.jsonl"


# -- the order, computed on one rank ----------------------------------------------------------


@pytest.mark.parametrize("kind", ["global", "resumable"])
def test_order_of_is_each_ranks_iteration_and_leaves_the_sampler_alone(kind):
    def sampler(rank: int) -> Any:
        if kind == "global":
            return GlobalBatchSampler(50, 12, rank, 3, seed=4, generator=torch.Generator())
        return ResumableSampler(range(50), 3, rank, seed=4, generator=torch.Generator())

    probe = sampler(0)
    probe.set_epoch(1)
    probe.skip_first(4)
    order, state = list(probe), probe.generator.get_state()
    for rank in range(3):
        own = sampler(rank)
        own.set_epoch(2)
        assert probe.order_of(2, rank).tolist() == list(own)
    # its epoch, its skip and the loader's generator as they were
    assert list(probe) == order and torch.equal(probe.generator.get_state(), state)


def test_the_batches_of_all_ranks_are_the_ranks_batches_side_by_side():
    reads = []
    for rank in range(2):
        sampler = ResumableSampler(range(23), 2, rank, seed=1)
        sampler.set_epoch(3)
        reads.append([b.tolist() for b in DataLoader(range(23), batch_size=5, sampler=sampler)])
    # 12 per rank (one repeated to pad): batches of 5, 5 and 2
    assert epoch_batches_of_all_ranks(sampler, 3, 2, 5).tolist() == [reads[0][b] + reads[1][b] for b in range(3)]


# -- the file ---------------------------------------------------------------------------------


class Named(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> int:
        return index

    def sample_keys(self) -> List[str]:
        return [f"class{i % 2}/img{i}.png" for i in range(10)]


def recorder(path: Path, world_size: int = 1) -> SampleRecorder:
    sampler = GlobalBatchSampler(10, 4, 0, world_size, seed=0)
    return SampleRecorder(path, DataLoader(Named(), batch_size=4 // world_size, sampler=sampler), world_size)


def test_keys_are_the_datasets_sample_keys_and_accumulated_batches_follow_each_other(tmp_path):
    path = tmp_path / "samples.jsonl"
    rec = recorder(path, world_size=2)
    order = GlobalBatchSampler(10, 4, 0, 1, seed=0).order_of(0, 0).tolist()  # one rank reads the whole global batches
    rec.step(0, 1, 0, 2)  # train.accumulate=2: batches 0 and 1 made step 1
    assert not path.exists()  # buffered until a log step or a checkpoint
    rec.flush()
    assert lines(path) == [{"step": 1, "keys": [Named().sample_keys()[i] for i in order[:8]]}]


class Tabled(Named):
    def key_table(self) -> StringTable:  # a folder's keys: read from its table, no list of them made
        return StringTable.from_strings(self.sample_keys())


def test_a_datasets_key_table_gives_the_keys_its_list_gives(tmp_path):
    for dataset in (Named(), Tabled()):
        sampler = GlobalBatchSampler(10, 4, 0, 2, seed=0)
        rec = SampleRecorder(tmp_path / f"{type(dataset).__name__}.jsonl", DataLoader(dataset, 2, sampler=sampler), 2)
        for step in range(1, 3):
            rec.step(1, step, step - 1, step)
        rec.flush()
    assert (
        lines(tmp_path / "Tabled.jsonl") == lines(tmp_path / "Named.jsonl")
        and len(lines(tmp_path / "Named.jsonl")) == 2
    )


def test_a_resume_cuts_the_file_back_to_the_checkpoints_step(tmp_path):
    path = tmp_path / "samples.jsonl"
    rec = recorder(path)
    for step in range(1, 3):
        rec.step(0, step, step - 1, step)
    rec.flush()
    first = path.read_text()
    rec.step(1, 3, 0, 1)
    rec.step(1, 4, 1, 2)
    rec.flush()
    with open(path, "a") as fh:  # a kill -9 in the middle of a write
        fh.write('{"step": 5, "ke')
    again = recorder(path)
    again.resume_at(2)  # the checkpoint of step 2: steps 3-5 are taken again
    assert path.read_text() == first
    again.step(1, 3, 0, 1)
    again.step(1, 4, 1, 2)
    again.flush()
    assert [row["step"] for row in lines(path)] == [1, 2, 3, 4]


def test_a_resume_without_the_earlier_lines_says_so(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        recorder(tmp_path / "samples.jsonl").resume_at(6)
    assert "steps 1-6 are not recorded (train.record_samples was off then)" in caplog.text


def test_the_setting_is_off_by_default_inert_on_resume_and_needs_the_torch_loader():
    assert load_config(None, []).train.record_samples is False
    assert field_rules(Config)["train.record_samples"] == "inert"
    with pytest.raises(ConfigError, match="'train.record_samples' needs data.loader=torch"):
        load_config(None, ["train.record_samples=true", "data.loader=dali"])
    with pytest.raises(ConfigError, match="train.record_samples needs the framework's training loader"):
        SampleRecorder(Path("samples.jsonl"), [(torch.zeros(1), torch.zeros(1))], 1)


# -- real runs --------------------------------------------------------------------------------


def test_one_process_records_every_step_and_every_sample_once_per_epoch(tmp_path):
    rows = lines(train(tmp_path, "train.epochs=2", "data.drop_last=false"))
    keys = sample_keys(Digits("train"))  # 1257 samples: 19 batches of 64 and one of 41 per epoch
    assert [row["step"] for row in rows] == list(range(1, 41))
    for epoch in (rows[:20], rows[20:]):
        seen = [key for row in epoch for key in row["keys"]]
        assert sorted(seen) == sorted(keys)
    assert rows[0]["keys"] != rows[20]["keys"]  # each epoch its own order


def test_the_keys_are_what_the_model_was_given_with_accumulation(tmp_path, monkeypatch):
    record = tmp_path / "reads"
    monkeypatch.setenv("REGTRAIN_RECORD", str(record))
    path = train(tmp_path, *RECORDED_DIGITS, "train.epochs=2", "train.accumulate=3", "train.log_every=4")
    rows = lines(path)
    reads = (tmp_path / "reads.rank0").read_text().split()
    assert len(rows) == 2 * 7  # 19 batches per epoch: 6 groups of 3 and one of 1
    assert [len(row["keys"]) for row in rows[:7]] == [192] * 6 + [64]
    assert [key for row in rows for key in row["keys"]] == reads


def test_a_folder_is_recorded_by_relative_paths(tmp_path):
    for split in ("train", "val", "test"):
        for shade, name in ((0, "a"), (128, "b"), (255, "c")):
            (tmp_path / "data" / split / name).mkdir(parents=True)
            for i in range(4):
                Image.fromarray(np.full((8, 8, 3), shade, dtype=np.uint8)).save(
                    tmp_path / "data" / split / name / f"{i}.png"
                )
    path = train(
        tmp_path,
        "data.name=image_folder",
        f"data.root={tmp_path / 'data'}",
        "model.input_size=[3,8,8]",
        "custom_imports=[tests.fixtures.brightness_net]",
        "model.name=brightness_classifier",
        "model.args={num_classes: 3}",
        "data.batch_size=4",
        "train.epochs=1",
    )
    rows = lines(path)
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert sorted(key for row in rows for key in row["keys"]) == [f"{c}/{i}.png" for c in "abc" for i in range(4)]


# -- several processes, kill -9 and resume ------------------------------------------------------

GLOBAL = 32  # 39 steps per epoch
DIST = [*SMALL, *RECORDED_DIGITS, f"data.global_batch_size={GLOBAL}", "train.epochs=2"]
DIST += ["train.checkpoint_every_steps=4", "train.log_every=3"]  # flushes between checkpoints


def launch(nproc: int, out: Path, *extra: str, kill_at: int = 0) -> subprocess.CompletedProcess:
    args = [f"experiment.output_root={out}", "experiment.name=run", *DIST, *extra]
    cmd = torchrun(nproc, *args) if nproc > 1 else [PYTHON, "main.py", *args]
    if not kill_at:  # its processes forked from the worker's main.py server
        return run(cmd, TIMEOUT, {"REGTRAIN_RECORD": str(out / "reads")})
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env.update({"REGTRAIN_RECORD": str(out / "reads"), "REGTRAIN_KILL_AT": str(kill_at)})
    # a session of its own: the kill takes the launcher's whole process group, never pytest
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
    )


def ran(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def killed(proc: subprocess.CompletedProcess) -> None:
    # one process dies of the SIGKILL; torchrun's launcher may outlive its ranks and fail
    assert proc.returncode != 0, (proc.stdout + proc.stderr)[-3000:]


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("one")
    ran(launch(1, out))
    return (out / "run" / "latest" / "samples.jsonl").read_text()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_two_ranks_record_what_they_read_and_what_one_process_records(tmp_path, one_process):
    ran(launch(2, tmp_path))
    text = (tmp_path / "run" / "latest" / "samples.jsonl").read_text()
    assert text == one_process
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 2 * 39 and all(len(row["keys"]) == GLOBAL for row in rows)
    assert [[int(k) for k in row["keys"]] for row in rows] == global_batches(tmp_path / "reads", 2, GLOBAL)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_killed_mid_epoch_and_resumed_records_each_step_once(tmp_path, one_process):
    before, after = 2, 1  # killed on 2 ranks, resumed on 1: the world size changes too
    # rank 0 dies reading the first sample of step 8: steps 1-6 were flushed (log steps 3, 6), the checkpoint is at 4
    killed(launch(before, tmp_path, kill_at=7 * GLOBAL // before + 1))
    path = tmp_path / "run" / "latest" / "samples.jsonl"
    assert [row["step"] for row in lines(path)] == list(range(1, 7))
    ran(launch(after, tmp_path, "--resume"))
    assert path.read_text() == one_process
