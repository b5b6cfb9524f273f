"""The sharded checkpoint store in one process: completeness, checksums, links, rotation, fallback."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from utils.checkpoint.sharded import BEST, LAST, ShardedCheckpointStore, read_state
from utils.checkpoint.stores import open_checkpoint_store
from utils.errors import CheckpointError


def state(value: float) -> dict:
    return {
        "format": 3,
        "model": {"w": torch.full((4,), value)},
        "optimizer": {"state": {}, "param_groups": []},
        "progress": {"epoch": 0, "batch": 0, "step": int(value)},
    }


def test_save_links_rotates_and_reads_back(tmp_path: Path):
    store = ShardedCheckpointStore(tmp_path, keep=2)
    for step in (1, 2, 3):
        store.save(state(step), 0, step)
    assert [p.name for p in store.numbered()] == ["epoch0000_batch000003.dcp", "epoch0000_batch000002.dcp"]
    assert (tmp_path / LAST).resolve() == store.path_for(0, 3) and not (tmp_path / BEST).exists()
    assert read_state(tmp_path / LAST)["progress"]["step"] == 3 and "model" not in read_state(tmp_path / LAST)
    assert isinstance(open_checkpoint_store(tmp_path), ShardedCheckpointStore)
    assert not list(tmp_path.glob(".*"))  # no temporary left


@pytest.mark.parametrize("damage", ["metadata", "shard"])
def test_an_incomplete_or_damaged_directory_is_skipped(tmp_path: Path, damage: str):
    store = ShardedCheckpointStore(tmp_path, keep=3)
    store.save(state(1), 0, 1)
    newest = store.save(state(2), 0, 2)
    if damage == "metadata":
        (newest / ".metadata").unlink()  # killed before the coordinator finished
    else:
        shard = next(newest.glob("*.distcp"))
        shard.write_bytes(shard.read_bytes()[:-3])
    assert store.latest_usable() == store.path_for(0, 1)
    with pytest.raises(CheckpointError):
        read_state(newest)
