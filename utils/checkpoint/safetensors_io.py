"""``.safetensors`` weight files: read wherever weights are read, written by ``python -m utils.checkpoint.convert``.

A safetensors file holds named tensors and a small JSON header, nothing that runs when it
is read, so it needs no allowlist and no trust.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Dict, Mapping, Union

import torch

from utils.checkpoint.files import write_hashed
from utils.errors import CheckpointError

SUFFIX = ".safetensors"


def is_safetensors(path: Union[str, Path]) -> bool:
    """Whether ``path`` names a safetensors file (by its suffix, as the ecosystem names them)."""
    return Path(path).suffix.lower() == SUFFIX


def read_safetensors(path: Union[str, Path]) -> Dict[str, torch.Tensor]:
    """The tensors of a ``.safetensors`` file, on the CPU; CheckpointError when it is not one."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return dict(load_file(str(path), device="cpu"))
    except (SafetensorError, OSError) as err:
        raise CheckpointError(
            f"weights file '{path}' is corrupt or not a safetensors file ({type(err).__name__}: {err})"
        ) from err


def _unshared(weights: Mapping[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
    """Contiguous CPU tensors, each with storage of its own (safetensors refuses tied or strided ones)."""
    seen, out = set(), {}
    for name, tensor in weights.items():
        tensor = tensor.detach().cpu().contiguous()
        key = (tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        if tensor.untyped_storage().nbytes() and key in seen:
            tensor = tensor.clone()  # tied weights: safetensors stores each name's own copy
        seen.add(key)
        out[name] = tensor
    return out


def write_safetensors(weights: Mapping[str, torch.Tensor], path: Union[str, Path], metadata: Mapping[str, str]) -> str:
    """Write ``weights`` to ``path`` as safetensors (temporary file, fsync, ``.sha256``, rename); returns the SHA-256."""
    from safetensors.torch import save

    data = save(_unshared(weights), metadata={"format": "pt", **metadata})
    return write_hashed(path, lambda fd: _write_bytes(data, fd))


def _write_bytes(data: bytes, fd: int) -> str:
    """``data`` into the open file ``fd``, fsynced; its SHA-256."""
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    return hashlib.sha256(data).hexdigest()
