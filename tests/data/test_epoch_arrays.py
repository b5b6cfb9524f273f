"""Epoch orders told position by position give exactly the orders per-sample Python loops give: the same
shuffle and window order, the same rank slices and padding as ``DistributedSampler``, the same global batches
and the same batches of all ranks, for several seeds, epochs, windows, world sizes and skips.

The references (``tests/fixtures/loop_orders.py``) compute each order from its definition, one position at a
time; a checkpoint's resume depends on the orders staying bit-identical.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch
from torch.utils.data import DistributedSampler

from tests.fixtures.loop_orders import Listed, groups_of, loop_batches, loop_global_rank, loop_permutation, loop_rank
from utils.data.sample_order import Dealing, epoch_batches_of_all_ranks
from utils.data.samplers import GlobalBatchSampler, ResumableSampler, WindowOrder, epoch_order


def cases(count: int):
    rng = random.Random(11)
    for _ in range(count):
        length = rng.choice([1, 2, 7, 31, 100, 333])
        shard_of = [rng.randrange(rng.choice([1, 3, 9, 40])) for _ in range(length)]
        window = rng.choice([None, 1, 2, 3, 8])
        yield length, shard_of, window, rng.randrange(1000), rng.randrange(6), rng.choice([1, 2, 3, 4, 8])


@pytest.mark.parametrize("case", list(cases(40)))
def test_every_order_is_the_per_sample_loops_order(case):
    length, shard_of, window, seed, epoch, world = case
    order_window = WindowOrder(np.array(shard_of), window) if window else None
    groups = groups_of(shard_of) if window else None
    expected = loop_permutation(length, seed, epoch, groups, window or 0)
    assert epoch_order(length, seed, epoch, order_window).at(np.arange(length)).tolist() == expected
    # ResumableSampler: DistributedSampler's ranks and padding, over the epoch's order
    samplers = [
        ResumableSampler(list(range(length)), world, r, seed, torch.Generator(), order_window) for r in range(world)
    ]
    for rank, sampler in enumerate(samplers):
        sampler.set_epoch(epoch)
        assert list(sampler) == loop_rank(expected, world, rank) == sampler.order_of(epoch, rank).tolist()
        plain = DistributedSampler(list(range(length)), world, rank, shuffle=False)
        assert list(sampler) == [expected[at] for at in plain]
        sampler.skip_first(epoch)
        assert list(sampler) == loop_rank(expected, world, rank)[epoch:]
    ranks = [loop_rank(expected, world, r) for r in range(world)]
    for batch in (1, 2, 3, 5):
        assert epoch_batches_of_all_ranks(samplers[0], epoch, world, batch).tolist() == loop_batches(ranks, batch)
    # GlobalBatchSampler: rank r takes the r-th slice of each full global batch
    local = 1 + seed % 3
    if length < local * world:
        return
    mine = [loop_global_rank(torch.tensor(expected), local * world, world, r) for r in range(world)]
    for rank in range(world):
        sampler = GlobalBatchSampler(length, local * world, rank, world, seed, torch.Generator(), order_window)
        sampler.set_epoch(epoch)
        sampler.skip_first(epoch)
        assert list(sampler) == mine[rank][epoch:] and sampler.order_of(epoch, rank).tolist() == mine[rank]
    for batch in (local, 1, 2, 4):  # the loader's batch is the local one; others cut the deal across its rounds
        assert epoch_batches_of_all_ranks(sampler, epoch, world, batch).tolist() == loop_batches(mine, batch)


def test_a_deal_to_ranks_and_its_batches_keep_the_dtype_and_every_index():
    dealing = Dealing(
        Listed(np.arange(24, dtype=np.int32)), 24, 2, 3
    )  # rounds of 3 per rank: [0 1 2 | 3 4 5], [6 7 8 | ...]
    assert dealing.rank(1).tolist() == [3, 4, 5, 9, 10, 11, 15, 16, 17, 21, 22, 23]
    batches = dealing.batches(5)  # 12 per rank: batches of 5, 5, 2
    assert batches.tolist() == [
        [0, 1, 2, 6, 7, 3, 4, 5, 9, 10],
        [8, 12, 13, 14, 18, 11, 15, 16, 17, 21],
        [19, 20, 22, 23],
    ]
    assert batches.span(0, 3).dtype == np.int32 and batches.span(1, 3).tolist() == [
        *batches.tolist()[1],
        *batches.tolist()[2],
    ]


def test_a_window_order_takes_shard_numbers_and_refuses_what_is_not_one():
    order = WindowOrder([4, 1, 4, 1, 7], 2)  # shards 1, 4 and 7; 2, 3 and 6 have no samples
    assert order.shard_of.dtype.kind == "i" and order.sizes.tolist() == [2, 2, 1]
    assert order.grouped[0].tolist() == [1, 3, 0, 2, 4]
    for narrow in (np.uint8, np.int16, np.uint16):  # narrower than 4 bytes: widened, grouped the same
        assert WindowOrder(np.array([4, 1, 4, 1, 7], dtype=narrow), 2).grouped[0].tolist() == [1, 3, 0, 2, 4]
    with pytest.raises(ValueError, match="shard numbers >= 0"):
        WindowOrder([0, -1], 2)
    with pytest.raises(ValueError, match="at least one shard"):
        WindowOrder([0, 1], 0)
    with pytest.raises(ValueError, match="covers 5 samples, the dataset holds 6"):
        epoch_order(6, 0, 0, order)


def test_an_epoch_is_held_as_int32_and_iterated_as_python_ints():
    sampler = GlobalBatchSampler(100_000, 64, 1, 2, seed=0)
    sampler.set_epoch(3)
    indices = iter(sampler)
    first = [next(indices) for _ in range(5)]
    assert first == sampler.order_of(3, 1)[:5].tolist() and all(type(i) is int for i in first)
    assert sampler.order_of(3, 1).dtype == np.int32  # 4 bytes an index while the epoch runs


@pytest.mark.parametrize("shards", [7, 70_000, 1 << 20])  # one radix pass, two, two with shard numbers past 2**16
def test_a_window_order_groups_block_by_block_as_one_stable_sort(shards, monkeypatch):
    import utils.data.samplers as samplers

    monkeypatch.setattr(samplers, "GROUP_BLOCK", 977)  # many blocks, a shard's samples spread over several
    shard_of = np.random.default_rng(shards).integers(0, shards, 20_000)
    members, sizes = WindowOrder(shard_of, 2).grouped
    counts = np.bincount(shard_of)
    assert np.array_equal(members, np.argsort(shard_of, kind="stable")) and members.dtype == np.int32
    assert np.array_equal(sizes, counts[counts > 0])
