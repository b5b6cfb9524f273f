"""Weights from a checkpoint of ours or a plain state_dict, loaded tolerantly (pretrained weights)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Union

import torch
from torch import nn

from utils.checkpoint.readers import load_file
from utils.checkpoint.sharded_layout import looks_sharded
from utils.checkpoint.state import Checkpoint, network_weights_of
from utils.checkpoint.store import BEST
from utils.errors import CheckpointError, name_list
from utils.run.folder import RunFolder

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
        mismatched=[
            f"{k}: {tuple(v.shape)} -> {tuple(own[k].shape)}"
            for k, v in weights.items()
            if k in own and tuple(own[k].shape) != tuple(v.shape)
        ],
    )


def weight_mismatch(model: nn.Module, weights: Mapping[str, torch.Tensor]) -> str:
    """What keeps ``weights`` from loading into ``model``, for an error message."""
    diff = compare_keys(model.state_dict(), weights)
    parts = []
    for label, keys in (
        ("missing", diff.missing),
        ("unexpected", diff.unexpected),
        ("shape (checkpoint -> network)", diff.mismatched),
    ):
        if keys:
            parts.append(f"{label}: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''} ({len(keys)})")
    return "; ".join(parts) or "no key differs"


def _kind(tensor: torch.Tensor) -> str:
    if tensor.dtype == torch.bool:
        return "boolean"
    if tensor.is_complex():
        return "complex"
    return "floating-point" if tensor.is_floating_point() else "integer"


def check_values(own: Mapping[str, torch.Tensor], weights: Mapping[str, torch.Tensor], source: str) -> None:
    """CheckpointError, naming the tensors, when ``weights`` would load as values they do not hold: a tensor of
    another kind than the network's (integer into floating point or back: load_state_dict would convert it
    without a word, e.g. int64 counts as weights), or NaN/inf values (training from them gives NaN losses,
    which would be blamed on the learning rate). Only the tensors that load (same name and shape) are checked."""
    loads = [k for k, v in weights.items() if k in own and tuple(own[k].shape) == tuple(v.shape)]
    kinds = [f"{k}: {weights[k].dtype} -> {own[k].dtype}" for k in loads if _kind(weights[k]) != _kind(own[k])]
    if kinds:
        raise CheckpointError(
            f"'{source}' holds {len(kinds)} tensor(s) of another kind than the network's ({name_list(kinds, show=4)}; "
            "file -> network): integers are never loaded as floating-point weights or back, since the values would "
            "be converted without a word; check that the file holds this network's weights as saved"
        )
    broken = [k for k in loads if weights[k].is_floating_point() and not bool(torch.isfinite(weights[k]).all())]
    if broken:
        raise CheckpointError(
            f"'{source}' holds NaN or infinite values in {len(broken)} tensor(s) ({name_list(broken, show=4)}): "
            "a network loaded from it computes NaN; use another file (an earlier checkpoint of the run)"
        )


class LoadReport(NamedTuple):
    loaded: List[str]
    missing: List[str]
    unexpected: List[str]
    mismatched: List[str]  # "name: checkpoint shape -> model shape"


WRAPPER_PREFIXES = ("module.", "_orig_mod.")


def load_matching(
    model: nn.Module,
    state: Dict[str, torch.Tensor],
    prefix: str = "",
    strict: bool = False,
    check: Optional[Callable[[LoadReport], None]] = None,
    source: str = "the weights",
) -> LoadReport:
    """Load the tensors of ``state`` whose names and shapes match ``model``.

    ``prefix`` is prepended to every checkpoint key (``backbone.`` loads a bare
    backbone into a network); the ``module.`` prefix of DDP and the ``_orig_mod.`` prefix of a
    ``torch.compile`` wrapper are stripped. ``check(report)`` may refuse the load before any tensor is copied.
    """
    cleaned = {}
    for key, value in state.items():
        while key.startswith(WRAPPER_PREFIXES):
            key = key.split(".", 1)[1]
        cleaned[prefix + key] = value
    own = model.state_dict()
    check_values(own, cleaned, source)
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
    if check is not None:
        check(report)
    model.load_state_dict(matching, strict=False)
    return report


def log_report(report: LoadReport, source: str) -> None:
    log.info("loaded %d tensors from %s", len(report.loaded), source)
    for label, keys in (
        ("missing (kept their init)", report.missing),
        ("unexpected (ignored)", report.unexpected),
        ("shape-mismatched (dropped; new from the network's init)", report.mismatched),
    ):
        if keys:
            log.warning(
                "%s: %d %s: %s", source, len(keys), label, ", ".join(keys[:20]) + (" ..." if len(keys) > 20 else "")
            )


# The documented share (README, model.pretrained_min_share): weights that fill less of the model are another model's.
MIN_SHARE = 0.5
PRETRAINED_WAY_OUT = "set model.pretrained_min_share lower to load a partial match on purpose (0: any)"
BACKBONE_WAY_OUT = (
    "to load a partial match on purpose, give the file as model.pretrained with model.pretrained_prefix=<the backbone's "
    "prefix in the network, e.g. {prefix}> and model.pretrained_min_share=0 instead of the backbone's pretrained"
)


class MinShare(NamedTuple):
    """The least share of the model's floating-point tensors a pretrained file must fill, and how to allow less."""

    share: float = MIN_SHARE
    way_out: str = BACKBONE_WAY_OUT.format(prefix="backbone.")


def read_weights(path: Union[str, Path]) -> Dict[str, torch.Tensor]:
    """The network weights a pretrained source holds: a file (torch or ``.safetensors``) or a sharded checkpoint directory;
    CheckpointError for another folder (a run's, say), naming what to give instead."""
    if looks_sharded(Path(path)):
        return Checkpoint.load(path).eval_weights
    if Path(path).is_dir():
        best = next((f for f in (RunFolder(Path(path)).checkpoints / BEST, Path(path) / BEST) if f.is_file()), None)
        raise CheckpointError(
            f"pretrained weights '{path}' is a folder; give a checkpoint or weights file (.pt, .pth, .safetensors) or a sharded checkpoint's "
            f"*.dcp directory{f', e.g. {best}' if best is not None else ''}"
        )
    return network_weights_of(load_file(path))


def check_share(model: nn.Module, report: LoadReport, prefix: str, source: str, minimum: MinShare) -> None:
    """CheckpointError when fewer than ``minimum.share`` of the model's floating-point tensors (those under
    ``prefix`` when one is given: the part the file is for) were loaded; BatchNorm counters do not count."""
    own = [k for k, v in model.state_dict().items() if v.is_floating_point() and k.startswith(prefix)]
    loaded = set(report.loaded)
    filled = sum(1 for k in own if k in loaded)
    if own and filled < minimum.share * len(own):
        part = (
            f"the {len(own)} floating-point tensors under '{prefix}'"
            if prefix
            else f"the model's {len(own)} floating-point tensors"
        )
        raise CheckpointError(
            f"'{source}' fills only {filled} of {part} ({filled / len(own):.0%}; {len(report.missing)} missing, "
            f"{len(report.mismatched)} of another shape), less than the {minimum.share:.0%} required: it looks like another "
            f"model's weights (check the file and model.pretrained_prefix); {minimum.way_out}"
        )


def load_weights(
    model: nn.Module, path: Union[str, Path], prefix: str = "", strict: bool = False, minimum: MinShare = MinShare()
) -> LoadReport:
    """Load pretrained weights from a local file into ``model``, reporting what did not fit; weights that fill
    less than ``minimum.share`` of the model's floating-point tensors are refused (CheckpointError)."""
    report = load_matching(
        model,
        read_weights(path),
        prefix=prefix,
        strict=strict,
        check=lambda r: check_share(model, r, prefix, str(path), minimum),
        source=str(path),
    )
    if not report.loaded:
        raise CheckpointError(
            f"no tensor of '{path}' matches the model by name and shape; is it the right file (or model.pretrained_prefix)?"
        )
    log_report(report, str(path))
    return report
