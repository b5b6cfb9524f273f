"""The parts of exact resume: random states round-trip, the sampler skips without loading, config guards."""

from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from utils.checkpoint.guard import config_differences
from utils.checkpoint.rng import capture_rng, restore_rank_rng
from utils.data.samplers import ResumableSampler


def draws():
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_random_states_round_trip_per_rank():
    states = []
    for rank in range(2):
        torch.manual_seed(rank), random.seed(rank), np.random.seed(rank)
        states.append(capture_rng())
    expected = [None, None]
    for rank in (1, 0):
        restore_rank_rng(states, rank)
        expected[rank] = draws()
    assert expected[0] != expected[1]
    assert restore_rank_rng(states, 1) and draws() == expected[1]
    assert not restore_rank_rng(states, 2)  # a rank the checkpoint did not have


class Counting(Dataset):
    def __init__(self, n: int) -> None:
        self.n, self.loaded = n, []

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        self.loaded.append(index)
        return index


def test_sampler_skip_continues_the_epoch_order_without_loading_the_skipped_samples():
    data = Counting(50)
    sampler = ResumableSampler(data, num_replicas=2, rank=1, seed=3, generator=torch.Generator())
    loader = DataLoader(data, batch_size=4, sampler=sampler, drop_last=True, generator=sampler.generator)
    sampler.set_epoch(2)
    full = [b.tolist() for b in loader]
    data.loaded.clear()
    sampler.set_epoch(2)
    sampler.skip_first(3 * 4)
    assert len(loader) == len(full) - 3
    rest = [b.tolist() for b in loader]
    assert rest == full[3:] and sorted(data.loaded) == sorted(i for b in full[3:] for i in b)
    sampler.set_epoch(3)  # a new epoch starts from its beginning
    assert len(loader) == len(full)


def test_an_epoch_iterator_draws_nothing_from_the_global_generator():
    data = Counting(20)
    sampler = ResumableSampler(data, num_replicas=1, rank=0, seed=0, generator=torch.Generator())
    loader = DataLoader(data, batch_size=4, sampler=sampler, generator=sampler.generator)
    torch.manual_seed(7)
    expected = torch.rand(1)
    torch.manual_seed(7)
    sampler.set_epoch(0)
    iter(loader)
    assert torch.equal(torch.rand(1), expected)


def test_config_differences_name_the_leaf_keys():
    saved = {
        "model": {"name": "classifier", "args": {"backbone_args": {"widths": [8, 16]}}},
        "data": {"batch_size": 64},
    }
    current = {
        "model": {"name": "classifier", "args": {"backbone_args": {"widths": [8, 32]}, "dropout": 0.1}},
        "data": {"batch_size": 64},
    }
    diffs = config_differences(saved, current, 2, 4)
    assert diffs[:2] == ["model.args.backbone_args.widths: [8, 16] -> [8, 32]", "model.args.dropout: None -> 0.1"]
    assert diffs[2].startswith(
        "world size: 2 -> 4, which changes the global batch from 2 x 64 = 128 to 4 x 64 = 256 samples (resume with 2 processes;"
    ), diffs
    assert config_differences(saved, saved, 1, 1) == []


def test_a_kept_global_batch_frees_the_world_size_and_the_per_process_batch():
    saved = {"data": {"batch_size": 64, "global_batch_size": 24}}
    assert config_differences(saved, {"data": {"batch_size": 32, "global_batch_size": 24}}, 2, 3) == []
    assert config_differences(saved, {"data": {"batch_size": 64, "global_batch_size": 48}}, 2, 3) == [
        "data.global_batch_size: 24 -> 48",
        "world size: 2 -> 3",
    ]
    started_without = {"data": {"batch_size": 64, "global_batch_size": None}}
    assert config_differences(started_without, {"data": {"batch_size": 64, "global_batch_size": 128}}, 2, 2) == [
        "data.global_batch_size: None -> 128"
    ]
