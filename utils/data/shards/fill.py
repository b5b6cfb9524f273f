"""Filling the shard cache ahead of the reads, when a whole split fits it.

A cold epoch fetches a shard when a sample first needs it; under the whole-split shuffle the
first few batches touch every shard, so the loader workers would wait while each arrives.
When the split fits ``cache_limit``, each DataLoader worker instead starts one background
thread at its first read that fetches every shard not yet cached, each worker of the machine
(of every local rank) from another place in the list, so the shards arrive beside the reads;
a read of a shard still on its way waits on that shard's lock (``cache.py``), as a second
reader always has. Nothing is fetched that the epoch does not read. Only in workers: the main
process forks the workers, and a fork must not copy a thread in the middle of a download.
"""

from __future__ import annotations

import os
import threading
from typing import List, Set, Tuple

from torch.utils.data import get_worker_info

from utils.data.shards.cache import ShardCache
from utils.data.shards.index import Shard

_DECIDED: Set[Tuple[str, str]] = set()  # (cache folder, split) this process filled, or found too large to fill


def start_fill(cache: ShardCache, shards: List[Shard], split: str) -> None:
    """Start this worker's fill of ``split`` once, if the whole split fits the cache; decided at the first read
    (this is called on every read of a remote sample)."""
    key = (str(cache.folder), split)
    if key in _DECIDED:
        return
    info = get_worker_info()
    if info is None:  # the main process never fills: it forks the workers, which must not copy a download
        return
    _DECIDED.add(key)
    if sum(shard.bytes for shard in shards) > cache.limit:
        return
    # this worker's place among the machine's workers (its rank's and the other local ranks'), which share the cache
    local_rank, local_ranks = int(os.environ.get("LOCAL_RANK", 0)), int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    start = (local_rank * info.num_workers + info.id) * len(shards) // (local_ranks * info.num_workers)
    order = shards[start:] + shards[:start]
    threading.Thread(target=_fill, args=(cache, order, split), name="shard-fill", daemon=True).start()


def _fill(cache: ShardCache, order: List[Shard], split: str) -> None:
    for shard in order:
        try:
            if cache.get(shard, split, if_room=True) is None:  # the cache filled up meanwhile (another split)
                return
        except Exception:  # the read that needs this shard meets the same failure, and names it
            return
