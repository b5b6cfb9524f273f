"""One weights or checkpoint file's contents, whatever its format: ``torch.save`` files weights-only
(``safe_load.py``), ``.safetensors`` files as such (``safetensors_io.py``). Above the format readers, below the
checksummed loading (``verified.py``) and the stores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Union

from utils.checkpoint.safe_load import load_torch
from utils.checkpoint.safetensors_io import is_safetensors, read_safetensors
from utils.errors import CheckpointError


def missing(path: Union[str, Path]) -> CheckpointError:
    """The error for a checkpoint path that names no file."""
    return CheckpointError(
        f"checkpoint '{path}' does not exist; check the path (runs keep theirs in output/<experiment>/run_NNN/checkpoints/)"
    )


def load_file(path: Union[str, Path]) -> Dict[str, Any]:
    """Load a checkpoint, state_dict or weights file on the CPU without running code (``safe_load.py``);
    a ``.safetensors`` file is read as one. CheckpointError when missing, unreadable or asking for more."""
    path = Path(path)
    if not path.is_file():
        raise missing(path)
    obj = read_safetensors(path) if is_safetensors(path) else load_torch(path)
    if not isinstance(obj, dict):
        raise CheckpointError(f"checkpoint '{path}' holds a {type(obj).__name__}, expected a dict or a state_dict")
    return obj
