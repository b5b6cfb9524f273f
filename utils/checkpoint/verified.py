"""One file of a run's checkpoint folder, checked: whether its name is a numbered checkpoint's, the numbered
file a link (``last.pt``, ``best.pt``) shares its bytes with, whether it matches its ``.sha256``, and loading
it only then (``load_verified``). ``store.py`` writes the folder these files are in.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Dict, Optional

from utils.checkpoint.files import file_digest, sidecar
from utils.checkpoint.readers import load_file, missing
from utils.errors import CheckpointError

NUMBERED = re.compile(r"^epoch(\d+)_batch(\d+)\.pt$")  # a numbered checkpoint's file name, not a link's


def is_numbered(name: str) -> bool:
    """Whether ``name`` is a numbered checkpoint's file name (``epoch<E>_batch<B>.pt``), not a link's (``last.pt``)."""
    return NUMBERED.match(name) is not None


def numbered_file_linked_by(path: Path) -> Optional[Path]:
    """The numbered checkpoint that ``path`` (``last.pt``, ``best.pt``) is a hard link to, if any."""
    if NUMBERED.match(path.name):
        return None
    try:
        inode = path.stat()
        for other in path.parent.iterdir():
            if NUMBERED.match(other.name) and os.path.samestat(other.stat(), inode):
                return other
    except OSError:  # a file removed while looking: no twin
        pass
    return None


def verify(path: Path) -> Optional[str]:
    """None when ``path`` matches its stored checksum (or has none), else what is wrong.

    A link's checksum is its numbered file's, so a crash between renaming a link
    and writing its own ``.sha256`` does not make it look corrupt.
    """
    side = sidecar(numbered_file_linked_by(path) or path)
    if not side.is_file():
        side = sidecar(path)
        if not side.is_file():
            return None
    with open(side, errors="replace") as fh:  # a checksum line: not UTF-8 or longer is no checksum, a mismatch
        expected = fh.read(1024).strip()
    actual = file_digest(path)
    return (
        None
        if actual == expected
        else f"checksum mismatch (stored {expected[:12]}..., file {actual[:12]}...): the file is truncated or corrupt"
    )


def load_verified(path: Path) -> Dict[str, Any]:
    """Load ``path`` after checking its checksum; CheckpointError when either fails."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(
            f"checkpoint '{path}' is a folder, not a checkpoint file nor a sharded checkpoint directory (.dcp); give a checkpoint file (e.g. <run>/checkpoints/best.pt) or a .dcp directory"
        )
    if not path.is_file():
        raise missing(path)
    problem = verify(path)
    if problem:
        raise CheckpointError(
            f"checkpoint '{path}': {problem}; use an earlier checkpoint of the run, or delete its .sha256 if you changed the file on purpose"
        )
    return load_file(path)
