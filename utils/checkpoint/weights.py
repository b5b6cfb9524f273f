"""Weights from a checkpoint of ours or a plain state_dict, loaded tolerantly (pretrained weights)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict, List, Mapping, NamedTuple, Union

import torch
from torch import nn

from utils.checkpoint.files import load_file
from utils.checkpoint.state import network_weights_of
from utils.errors import CheckpointError

log = logging.getLogger(__name__)


class KeyDiff(NamedTuple):
    """How a set of weights differs from a network's state_dict, by name and shape."""

    missing: List[str]  # in the network, not in the weights
    unexpected: List[str]  # in the weights, not in the network
    mismatched: List[str]  # "name: weights' shape -> network's shape"


def compare_keys(own: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor]) -> KeyDiff:
    """The names missing from ``weights``, those ``own`` lacks, and those whose shapes differ."""
    return KeyDiff(
        missing=[k for k in own if k not in weights],
        unexpected=[k for k in weights if k not in own],
        mismatched=[f"{k}: {tuple(v.shape)} -> {tuple(own[k].shape)}" for k, v in weights.items() if k in own and tuple(own[k].shape) != tuple(v.shape)],
    )


def weight_mismatch(model: nn.Module, weights: Mapping[str, torch.Tensor]) -> str:
    """What keeps ``weights`` from loading into ``model``, for an error message."""
    diff = compare_keys(model.state_dict(), weights)
    parts = []
    for label, keys in (("missing", diff.missing), ("unexpected", diff.unexpected), ("shape (checkpoint -> network)", diff.mismatched)):
        if keys:
            parts.append(f"{label}: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''} ({len(keys)})")
    return "; ".join(parts) or "no key differs"


class LoadReport(NamedTuple):
    loaded: List[str]
    missing: List[str]
    unexpected: List[str]
    mismatched: List[str]  # "name: checkpoint shape -> model shape"


WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def load_matching(model: nn.Module, state: Dict[str, torch.Tensor], prefix: str = "", strict: bool = False) -> LoadReport:
    """Load the tensors of ``state`` whose names and shapes match ``model``.

    ``prefix`` is prepended to every checkpoint key (``backbone.`` loads a bare
    backbone into a network); the ``module.`` prefix of DDP and the ``_orig_mod.`` prefix of a
    ``torch.compile`` wrapper are stripped.
    """
    cleaned = {}
    for key, value in state.items():
        while key.startswith(WRAPPER_PREFIXES):
            key = key.split(".", 1)[1]
        cleaned[prefix + key] = value
    own = model.state_dict()
    matching = {k: v for k, v in cleaned.items() if k in own and own[k].shape == v.shape}
    missing, unexpected, mismatched = compare_keys(own, cleaned)
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
    report = load_matching(model, network_weights_of(load_file(path)), prefix=prefix, strict=strict)
    if not report.loaded:
        raise CheckpointError(f"no tensor of '{path}' matches the model by name and shape; is it the right file (or model.pretrained_prefix)?")
    log_report(report, str(path))
    return report
