"""Checkpoints: atomic saves, loading with clear errors, tolerant weight loading."""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Union

import torch
from torch import nn

log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """A missing, corrupt or mismatched checkpoint; the message names the file and the fix."""


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


def state_dict_of(obj: Dict[str, Any]) -> Dict[str, torch.Tensor]:
    """The model weights in a checkpoint of ours or a plain state_dict.

    A checkpoint of a run that selected its best epoch with EMA weights
    (``eval.use_ema``) gives its ``ema`` entry: the weights it was evaluated with.
    """
    config = obj.get("config")
    if isinstance(config, dict) and config.get("eval", {}).get("use_ema") and isinstance(obj.get("ema"), dict):
        return obj["ema"]
    for key in ("model", "state_dict"):
        if key in obj and isinstance(obj[key], dict):
            return obj[key]
    return obj


class LoadReport(NamedTuple):
    loaded: List[str]
    missing: List[str]
    unexpected: List[str]
    mismatched: List[str]  # "name: checkpoint shape -> model shape"


def load_matching(model: nn.Module, state: Dict[str, torch.Tensor], prefix: str = "", strict: bool = False) -> LoadReport:
    """Load the tensors of ``state`` whose names and shapes match ``model``.

    ``prefix`` is prepended to every checkpoint key (``backbone.`` loads a bare
    backbone into a network); a ``module.`` prefix left by DDP is stripped.
    """
    cleaned = {}
    for key, value in state.items():
        key = key[len("module.") :] if key.startswith("module.") else key
        cleaned[prefix + key] = value
    own = model.state_dict()
    matching = {k: v for k, v in cleaned.items() if k in own and own[k].shape == v.shape}
    mismatched = [f"{k}: {tuple(v.shape)} -> {tuple(own[k].shape)}" for k, v in cleaned.items() if k in own and own[k].shape != v.shape]
    missing = [k for k in own if k not in cleaned]
    unexpected = [k for k in cleaned if k not in own]
    report = LoadReport(sorted(matching), missing, unexpected, mismatched)
    if strict and (missing or unexpected or mismatched):
        raise CheckpointError(
            "weights do not match the model (model.pretrained_strict=true): "
            f"missing {missing[:10]}, unexpected {unexpected[:10]}, shape-mismatched {mismatched[:10]}; "
            "set model.pretrained_strict=false to load the matching tensors and re-initialise the rest, "
            "or fix model.pretrained_prefix"
        )
    model.load_state_dict(matching, strict=False)
    return report


def log_report(report: LoadReport, source: str) -> None:
    log.info("loaded %d tensors from %s", len(report.loaded), source)
    for label, keys in (("missing (kept their init)", report.missing), ("unexpected (ignored)", report.unexpected), ("shape-mismatched (dropped; new from the network's init)", report.mismatched)):
        if keys:
            log.warning("%s: %d %s: %s", source, len(keys), label, ", ".join(keys[:20]) + (" ..." if len(keys) > 20 else ""))


def load_weights(model: nn.Module, path: Union[str, Path], prefix: str = "", strict: bool = False) -> LoadReport:
    """Load pretrained weights from a local file into ``model``, reporting what did not fit."""
    report = load_matching(model, state_dict_of(load_file(path)), prefix=prefix, strict=strict)
    if not report.loaded:
        raise CheckpointError(f"no tensor of '{path}' matches the model by name and shape; is it the right file (or model.pretrained_prefix)?")
    log_report(report, str(path))
    return report
