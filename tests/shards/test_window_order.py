"""``data.args.shuffle_window``: shards in a seeded order, samples shuffled within each window of shards;
the same global batches on any world size, a resume that skips by index, each sample once an epoch."""

from __future__ import annotations

import json

import numpy as np
import pytest

import main
from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.data.sample_order import epoch_batches_of_all_ranks
from utils.data.samplers import GlobalBatchSampler, ResumableSampler, WindowOrder, epoch_order

# 10 shards of uneven sizes, 47 samples
GROUPS = [
    list(range(start, end))
    for start, end in zip([0, 3, 9, 10, 17, 22, 30, 31, 38, 44], [3, 9, 10, 17, 22, 30, 31, 38, 44, 47])
]
WINDOW = WindowOrder(np.array([s for s, group in enumerate(GROUPS) for _ in group]), 3)


def shard_of(index: int) -> int:
    return next(s for s, group in enumerate(GROUPS) if index in group)


def whole(length: int, seed: int, epoch: int, window=None) -> list:
    return epoch_order(length, seed, epoch, window).at(np.arange(length)).tolist()


def test_the_order_takes_each_window_of_shards_whole_and_depends_only_on_seed_and_epoch():
    order = whole(47, seed=5, epoch=2, window=WINDOW)
    assert sorted(order) == list(range(47))
    assert order == whole(47, 5, 2, WINDOW) != whole(47, 5, 3, WINDOW)
    shards = []  # the shards in the order the epoch first meets them
    for index in order:
        if shard_of(index) not in shards:
            shards.append(shard_of(index))
    at = 0
    for start in range(0, 10, 3):  # each window: exactly its shards' samples, one after the other
        window = shards[start : start + 3]
        size = sum(len(GROUPS[s]) for s in window)
        assert sorted(order[at : at + size]) == sorted(i for s in window for i in GROUPS[s])
        at += size
    assert order[:3] != sorted(order[:3]) or order[3:6] != sorted(order[3:6])  # shuffled within the window
    # without a window: the shuffle of the whole split, seeded by the seed and the epoch apart (seed 5's epoch 2 is
    # not seed 6's epoch 1, as it is with DistributedSampler's seed + epoch)
    plain = whole(47, 5, 2)
    assert sorted(plain) == list(range(47)) and plain != whole(47, 6, 1) and plain != whole(47, 5, 3)


@pytest.mark.parametrize("world_size", [2, 3])
def test_global_batches_with_a_window_are_the_same_on_any_world_size(world_size):
    one = GlobalBatchSampler(47, 12, 0, 1, seed=1, window=WINDOW)
    many = [GlobalBatchSampler(47, 12, rank, world_size, seed=1, window=WINDOW) for rank in range(world_size)]
    for epoch in (0, 1):
        assert (
            epoch_batches_of_all_ranks(many[0], epoch, world_size, 12 // world_size).tolist()
            == epoch_batches_of_all_ranks(one, epoch, 1, 12).tolist()
        )
    many[1].set_epoch(1)
    many[1].skip_first(4)  # a resume after 4 // (12 / w) steps: the rest of the epoch, read by index
    assert list(many[1]) == many[1].order_of(1, 1)[4:].tolist()


def test_a_per_rank_sampler_with_a_window_covers_the_epoch_and_skips_exactly():
    dataset = list(range(47))
    ranks = [ResumableSampler(dataset, 2, rank, seed=3, window=WINDOW) for rank in range(2)]
    for sampler in ranks:
        sampler.set_epoch(4)
    both = [list(sampler) for sampler in ranks]
    assert len(both[0]) == len(both[1]) == 24 and set(both[0]) | set(both[1]) == set(range(47))
    assert [i for pair in zip(*both) for i in pair][:47] == whole(47, 3, 4, WINDOW)
    ranks[0].skip_first(5)
    assert list(ranks[0]) == both[0][5:] == ranks[0].order_of(4, 0)[5:].tolist()


@pytest.mark.slow  # over 2 s
def test_training_from_shards_with_a_window_reads_each_window_together(tmp_path, capsys):
    packed = tmp_path / "p"
    assert main.main(["--mode", "pack", "--output", str(packed), "--shard-size", "100KB", "data.name=digits"]) == 0
    dataset = build_dataset(DataConfig(name="shards", root=str(packed), args={"shuffle_window": 2}), "train")
    window = dataset.window_order()
    assert window.window == 2 and window.shard_of.tolist() == dataset.source.index.samples["shard"].tolist()
    args = [f"experiment.output_root={tmp_path / 'out'}", "data.name=shards", f"data.root={packed}", "threads=1"]
    args += [
        "data.args={shuffle_window: 2}",
        "data.global_batch_size=64",
        "train.epochs=1",
        "train.record_samples=true",
    ]
    assert main.main(args) == 0
    capsys.readouterr()
    rows = [
        json.loads(line) for line in next((tmp_path / "out").glob("*/run_001/samples.jsonl")).read_text().splitlines()
    ]
    keys = [int(key) for row in rows for key in row["keys"]]
    assert len(keys) == len(set(keys)) == len(dataset) // 64 * 64  # each sample once, the last part batch dropped
    # the keys of in-memory data: indices
    shard = {
        int(dataset.source.index.key(at)): int(dataset.source.index.samples["shard"][at]) for at in range(len(dataset))
    }
    spans = [len({shard[int(k)] for k in row["keys"]}) for row in rows]
    assert max(spans) <= 4  # a global batch of 64 lies in one window of 2 shards, or across two windows
    assert len({shard[k] for k in keys[:64]}) <= 4 < len(dataset.source.index.shards)
    # a resume may move or resize the cache (inert), not change the order (refused)
    resume = [*args, "--resume", str(next((tmp_path / "out").glob("*/run_001")))]  # finished: named
    assert main.main([a.replace("{shuffle_window: 2}", "{shuffle_window: 2, cache_limit: 1GB}") for a in resume]) == 0
    assert "changed on resume: data.args.cache_limit" in capsys.readouterr().err
    assert main.main([a.replace("{shuffle_window: 2}", "{shuffle_window: 3}") for a in resume]) == 2
    assert "data.args.shuffle_window: 2 -> 3" in capsys.readouterr().err
    # the same checkpoint on the data it was packed from: the shards' own args are named, with the fix
    best = next((tmp_path / "out").glob("*/run_001/checkpoints/best.pt"))
    assert main.main(["--mode", "test", "--checkpoint", str(best), "data.name=digits"]) == 2
    err = capsys.readouterr().err
    assert "dataset 'digits' got unknown argument(s) ['shuffle_window']" in err
    assert "remove them from data.args, or give data.args whole (data.args={...} replaces" in err
    assert main.main(["--mode", "test", "--checkpoint", str(best), "data.name=digits", "data.args={}"]) == 0


def test_a_window_smaller_than_a_global_batch_is_named_with_the_window_to_set(caplog):
    from utils.data.loader import _warn_small_window

    _warn_small_window(WINDOW, 5)  # the 3 smallest shards hold 1 + 1 + 3 samples: enough
    assert not caplog.records
    _warn_small_window(WINDOW, 12)
    (record,) = caplog.records
    assert "shuffle_window=3: a window of 3 shards can hold as few as 5 samples, fewer than a global batch of 12" in (
        record.getMessage()
    ) and record.getMessage().endswith("raise data.args.shuffle_window to about 8 or more")


def test_a_packs_grouping_is_computed_once_kept_in_the_users_cache_and_mapped_after(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    packed = tmp_path / "p"
    assert main.main(["--mode", "pack", "--output", str(packed), "--shard-size", "100KB", "data.name=digits"]) == 0
    capsys.readouterr()
    config = DataConfig(name="shards", root=str(packed), args={"shuffle_window": 2})
    first = build_dataset(config, "train").window_order()
    members, sizes = first.grouped
    plain = WindowOrder(first.shard_of, 2)  # the same column, computed in memory
    assert np.array_equal(members, plain.grouped[0]) and np.array_equal(sizes, plain.grouped[1])
    assert isinstance(members, np.memmap) and len(list((tmp_path / "cache").rglob("*.window-v1-members.npy"))) == 1
    # the next start maps it: nothing is computed
    monkeypatch.setattr(WindowOrder, "_group", lambda self: pytest.fail("computed again"))
    again = build_dataset(config, "train").window_order()
    assert isinstance(again.grouped[0], np.memmap) and np.array_equal(again.grouped[0], members)
    n = len(members)
    assert whole(n, 4, 1, again) == whole(n, 4, 1, plain) and sorted(whole(n, 4, 1, again)) == list(range(n))
    # a kept file that is not the grouping (another length) is computed again and replaced
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (kept,) = (tmp_path / "cache").rglob("*.window-v1-members.npy")
    np.save(kept, np.arange(5, dtype=np.int32))
    third = build_dataset(config, "train").window_order()
    assert np.array_equal(third.grouped[0], plain.grouped[0]) and len(np.load(kept, mmap_mode="r")) == n
    # a cache that cannot be written: computed at each start, said once, nothing else
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))
    fourth = build_dataset(config, "train").window_order()
    assert not isinstance(fourth.grouped[0], np.memmap) and np.array_equal(fourth.grouped[0], plain.grouped[0])
