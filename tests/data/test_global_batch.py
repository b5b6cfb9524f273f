"""``data.global_batch_size``: one data order for every world size, the per-process batch derived from it."""

from __future__ import annotations

import dataclasses
from typing import List

import pytest
import torch

from utils.config.load import load_config
from utils.config.schema import DataConfig
from utils.data import with_process_batch
from utils.data.samplers import GlobalBatchSampler
from utils.errors import ConfigError

LENGTH, GLOBAL = 103, 12  # 8 global batches; the last 7 samples are left out


def global_order(world_size: int, epoch: int, skip_batches: int = 0) -> List[List[int]]:
    """The global batches the ranks of ``world_size`` read in ``epoch`` (after ``skip_batches``)."""
    local = GLOBAL // world_size
    reads = []
    for rank in range(world_size):
        sampler = GlobalBatchSampler(LENGTH, GLOBAL, rank, world_size, seed=5, generator=torch.Generator())
        sampler.set_epoch(epoch)
        sampler.skip_first(skip_batches * local)
        assert len(sampler) == (LENGTH // GLOBAL - skip_batches) * local
        reads.append(list(sampler))
    return [sum((r[k * local : (k + 1) * local] for r in reads), []) for k in range(len(reads[0]) // local)]


@pytest.mark.parametrize("world_size", [2, 3, 4, 6, 12])
def test_every_world_size_reads_the_global_batches_of_one_process(world_size):
    for epoch in (0, 1):
        assert global_order(world_size, epoch) == global_order(1, epoch)
    # a resume at any world size continues there
    assert global_order(world_size, 0, skip_batches=3) == global_order(1, 0)[3:]


def test_an_epoch_is_a_permutation_cut_into_full_global_batches():
    first, second = global_order(1, 0), global_order(1, 1)
    assert len(first) == LENGTH // GLOBAL and all(len(b) == GLOBAL for b in first)
    flat = [i for b in first for i in b]
    assert len(set(flat)) == len(flat) and set(flat) <= set(range(LENGTH))
    assert first != second  # each epoch its own order, from (seed, epoch)


def test_the_per_process_batch_comes_from_the_global_batch():
    cfg = DataConfig(batch_size=64, global_batch_size=24)
    assert with_process_batch(cfg, 3).batch_size == 8 and cfg.batch_size == 64  # the config itself is not changed
    assert with_process_batch(dataclasses.replace(cfg, global_batch_size=None), 3).batch_size == 64
    with pytest.raises(
        ConfigError,
        match=r"data.global_batch_size=24 cannot be split over 5 processes; run with one of \[1, 2, 3, 4, 6, 8, 12, 24\] processes",
    ):
        with_process_batch(cfg, 5)


def test_settings_that_contradict_a_fixed_global_batch_are_refused():
    with pytest.raises(ConfigError, match="set optim.lr_scaling=none and give optim.lr for the global batch"):
        load_config(None, ["data.global_batch_size=64", "optim.lr_scaling=linear"])
    with pytest.raises(ConfigError, match="'data.global_batch_size' needs data.loader=torch"):
        load_config(None, ["data.global_batch_size=64", "data.loader=dali"])
    with pytest.raises(ConfigError, match="'data.global_batch_size' must be >= 1 or null, got 0"):
        load_config(None, ["data.global_batch_size=0"])
