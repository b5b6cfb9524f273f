"""Checkpoint files: atomic saves and loading with clear errors."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, Union

import torch

from utils.errors import CheckpointError

log = logging.getLogger(__name__)


def atomic_save(obj: Any, path: Union[str, Path]) -> None:
    """``torch.save`` to a temporary file, flush + fsync, then rename over ``path``.

    A crash or a failed write (disk full) at any point leaves the previous file at
    ``path`` intact: the rename is the only step that touches it, and it is atomic.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(obj, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def load_file(path: Union[str, Path]) -> Dict[str, Any]:
    """Load a checkpoint on the CPU; CheckpointError when missing or unreadable."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' does not exist; check the path (runs keep theirs in output/<experiment>/checkpoints/)")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # truncated zip, pickle error, ...
        raise CheckpointError(f"checkpoint '{path}' is corrupt or not a PyTorch file ({type(err).__name__}: {err})") from err
    if not isinstance(obj, dict):
        raise CheckpointError(f"checkpoint '{path}' holds a {type(obj).__name__}, expected a dict or a state_dict")
    return obj
