"""The store of a run's checkpoint folder, of either kind: numbered files (``store.py``) or sharded directories
(``sharded.py``, ``dist.mode=fsdp``); above both, so neither imports the other."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from utils.checkpoint.sharded import ShardedCheckpointStore
from utils.checkpoint.sharded_layout import NAME
from utils.checkpoint.store import CheckpointStore


def open_checkpoint_store(directory: Path, keep: int = 2, sharded: Optional[bool] = None) -> Any:
    """The store of a run's checkpoint folder: sharded when ``sharded`` says so, or (None) when the folder holds sharded checkpoints."""
    if sharded is None:
        sharded = Path(directory).is_dir() and any(NAME.match(p.name) for p in Path(directory).iterdir())
    return ShardedCheckpointStore(directory, keep) if sharded else CheckpointStore(directory, keep)
