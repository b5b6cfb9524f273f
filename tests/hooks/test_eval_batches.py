"""after_eval_batch: which evaluations reach it, and a hook's sums over ranks equal one process's (empty slices too)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch

from tests.fixtures.dist_utils import spawn
from tests.fixtures.harness import run_with
from utils.amp import Amp
from utils.config.schema import AmpConfig
from utils.data.samplers import SliceSampler
from utils.distributed.process_group import DistInfo
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts
from utils.hook import Hook
from utils.metrics import build_metric
from utils.model.criterion import build_criterion
from utils.registry import HOOKS, NETWORKS


class BatchRecorder(Hook):
    """Counts the batches and samples each evaluation passes to ``after_eval_batch``."""

    def __init__(self) -> None:
        self.batches, self.samples, self.indices = Counter(), Counter(), []

    def after_eval_batch(self, trainer, batch):
        self.batches[batch.split] += 1
        self.samples[batch.split] += len(batch.inputs)
        self.indices.append((batch.split, batch.index))
        assert batch.outputs.shape == (len(batch.inputs), 4)


def test_validation_the_ema_pass_and_the_test_reach_after_eval_batch(tmp_path):
    recorder = BatchRecorder()
    run_with(recorder, "classification", tmp_path, ema=True)  # 2 epochs, 2 val batches of 4, then the test on them
    assert recorder.batches == {"val": 4, "val_ema": 4, "test": 2} and recorder.samples == {
        "val": 16,
        "val_ema": 16,
        "test": 8,
    }
    assert [i for split, i in recorder.indices if split == "val"] == [0, 1, 0, 1]  # per evaluation, from 0


def _confusion_on_shards(rank: int, world_size: int, samples: int) -> list:
    """The confusion counts ``confusion_matrix`` reduces after one validation of ``samples`` digits-like inputs."""
    torch.manual_seed(0)
    model = NETWORKS.build("classifier", num_classes=4, backbone_args={"in_channels": 1, "widths": [4]})
    g = torch.Generator().manual_seed(1)
    inputs, labels = torch.rand(samples, 1, 8, 8, generator=g), torch.randint(0, 4, (samples,), generator=g)
    mine = list(SliceSampler(samples, rank, world_size))
    loader = [(inputs[mine[i : i + 2]], labels[mine[i : i + 2]]) for i in range(0, len(mine), 2)]
    hook = HOOKS.build("confusion_matrix")
    parts = Parts(
        model,
        build_criterion([{"name": "cross_entropy"}]),
        Amp(AmpConfig(), torch.device("cpu")),
        metric=build_metric("classification"),
    )
    trainer = Trainer(parts, LoopOptions(), hooks=[hook], dist=DistInfo(rank=rank, world_size=world_size))
    metrics = trainer.evaluate(model, loader, split="val")
    matrix = hook.matrix("val")  # what after_validation draws; every rank reduces
    return [metrics["samples"], matrix.tolist() if matrix is not None else None]


def _both_sizes(rank: int, world_size: int) -> list:
    return [_confusion_on_shards(rank, world_size, samples) for samples in (2, 11)]


@pytest.mark.slow
def test_confusion_counts_over_three_ranks_one_of_them_empty_equal_one_process(tmp_path: Path):
    alone = [_confusion_on_shards(0, 1, samples) for samples in (2, 11)]  # no process group: one process
    assert [a[0] for a in alone] == [2, 11] and [sum(map(sum, a[1])) for a in alone] == [2, 11]
    ranks = spawn(_both_sizes, 3, tmp_path, timeout=120)  # with 2 samples on 3 ranks, rank 2 evaluates nothing
    assert all(result == alone for result in ranks)
