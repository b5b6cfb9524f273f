"""What a sharded checkpoint directory (``dist.mode=fsdp``) is named and holds, and telling one apart: the names
alone, below every reader of the checkpoint folder (``safe_load.py``'s ``--trust-file`` asks whether a folder is one;
``sharded.py`` writes and reads them).
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"^epoch(\d+)_batch(\d+)\.dcp$")
LAST, BEST = "last.dcp", "best.dcp"
STATE, SUMS = "state.pt", "SHA256SUMS"
TENSORS = ("model", "optimizer")  # the entries written as shards; everything else goes to state.pt


def is_sharded_checkpoint(path: Path) -> bool:
    """Whether ``path`` is (a link to) a complete-looking sharded checkpoint directory (it has ``.metadata``)."""
    return Path(path).is_dir() and (Path(path) / ".metadata").exists()


def looks_sharded(path: Path) -> bool:
    """Whether ``path`` is a sharded checkpoint directory, complete or not: named ``*.dcp``, or holding
    ``.metadata``, ``state.pt``, ``SHA256SUMS`` or DCP shards (a half-written one has no ``.metadata``)."""
    path = Path(path)
    if not path.is_dir():
        return False
    return (
        path.suffix == ".dcp"
        or any((path / name).exists() for name in (".metadata", STATE, SUMS))
        or any(path.glob("*.distcp"))
    )
