"""A pack's window order grouping (each shard's samples, ``WindowOrder.grouped``), computed once per machine and
mapped by every rank and run after it.

With ``data.args.shuffle_window`` the epoch's order needs each shard's samples: 4 bytes a sample, 400 MB and a few
seconds at 100 million samples, which every rank computed at every start and held in its own memory. The first
start that needs it writes it into the user's cache beside the index stamps (``checked.py``), named by the sha256
of the split's ``index.json``: the arrays it derives from are pinned by their own sha256 there, and loading checks
them (whole, or by a stamp) before anything reads them, so the same ``index.json`` means the same grouping. Later
starts map it read-only: the ranks of a machine share its pages through the page cache. Only this user's own
processes write there (the trust of the stamps); a file that is not what it should be (another length or type, a
half-written one is never seen: it is renamed into place whole) is computed again, and a cache that cannot be
written costs the computation at every start, nothing else.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np

from utils.data.samplers import Grouping
from utils.data.shards.checked import kept_in_cache, stamp_folder
from utils.data.shards.index import Index
from utils.files.owned import write_atomic

VERSION = "v1"  # in the files' names: raised whenever WindowOrder.grouped means another thing, so old files go unread


def _mapped(path: Path, dtype: type, length: Optional[int]) -> Optional[np.ndarray]:
    """The 1-D ``dtype`` array at ``path``, mapped read-only, when it is one (of ``length``); None otherwise."""
    try:
        if not path.is_file():  # absent, or a FIFO or device: nothing to read
            return None
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    good = isinstance(array, np.ndarray) and array.ndim == 1 and array.dtype == dtype
    return array if good and (length is None or len(array) == length) else None


def _save(path: Path, array: np.ndarray) -> None:
    write_atomic(path.parent, path, lambda fh: np.save(fh, array, allow_pickle=False), "a grouping is only a shortcut")


def kept_grouping(index: Index, compute: Callable[[], Grouping]) -> Grouping:
    """The grouping of ``index``'s shard column: mapped from the user's cache, else ``compute()``d, kept there and
    mapped (its computed copy freed)."""
    count, members_type = len(index), np.int32 if len(index) <= 1 << 31 else np.int64
    if index.digest is None:
        return compute()
    folder = stamp_folder()
    members_at, sizes_at = (
        folder / f"{index.digest[:40]}.window-{VERSION}-{part}.npy" for part in ("members", "sizes")
    )
    sizes = _mapped(sizes_at, np.dtype(np.int64), None)
    members = _mapped(members_at, np.dtype(members_type), count)
    if sizes is not None and members is not None and int(sizes.sum()) == count and (sizes > 0).all():
        return members, np.asarray(sizes)
    members, sizes = compute()

    def save() -> None:
        _save(sizes_at, sizes)  # sizes first: members beside them mean both are whole
        _save(members_at, members)

    if not kept_in_cache(save, "keep a window order's grouping", "each start computes it"):
        return members, sizes
    mapped = _mapped(members_at, np.dtype(members_type), count)
    return (members if mapped is None else mapped), sizes
