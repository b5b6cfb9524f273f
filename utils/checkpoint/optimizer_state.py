"""The optimizer's state restored into an optimizer built from the resumed run's config.

A checkpoint keeps the optimizer's per-parameter state (moments, step counts) and, since
framework 0.3, its layout: the parameter names of each group (``param_groups`` puts them in
``names``). A resume keeps the optimizer the config builds (its groups, their ``lr``,
``weight_decay``, ``betas``, ``momentum`` ...) and moves each parameter's saved state into it
by name, so a changed hyperparameter takes effect and a changed grouping
(``optim.param_groups``, ``optim.layer_decay``, ``model.freeze``) keeps every moment. A checkpoint
without names restores positionally, which needs the same group sizes.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from utils.errors import CheckpointError

log = logging.getLogger(__name__)

Layout = List[List[str]]  # parameter names per group, in the optimizer's order

RESET_WAY = "resume with the optim.param_groups, optim.layer_decay and model.freeze it was saved with, or pass --reset-optimizer to start the optimizer state afresh"


def layout_of(optimizer: Any) -> Optional[Layout]:
    """The names of the parameters of each group of ``optimizer``, or None when a group has none."""
    names = [group.get("names") for group in optimizer.param_groups]
    return None if any(n is None for n in names) else [list(n) for n in names]


def saved_layout(state: Dict[str, Any]) -> Optional[Layout]:
    """The layout an optimizer's ``state_dict()`` names (None for a checkpoint of an older version)."""
    groups = state.get("param_groups") or []
    names = [group.get("names") for group in groups]
    return None if not groups or any(n is None for n in names) else [list(n) for n in names]


def _flat(layout: Layout) -> List[str]:
    return [name for group in layout for name in group]


def hyperparameters(optimizer: Any) -> List[Dict[str, Any]]:
    """Each group's settings but its parameters: what the config gave the optimizer."""
    return [{key: value for key, value in group.items() if key != "params"} for group in optimizer.param_groups]


def keep_hyperparameters(optimizer: Any, settings: List[Dict[str, Any]]) -> None:
    """Put back ``settings`` (``hyperparameters`` taken before a load that overwrote them)."""
    for group, own in zip(optimizer.param_groups, settings):
        group.update(own)


def restore_optimizer(optimizer: Any, saved: Dict[str, Any], source: str) -> None:
    """Load the per-parameter state of ``saved`` (a ``torch.optim`` state_dict) into ``optimizer``,
    keeping ``optimizer``'s own groups and hyperparameters; CheckpointError when the layouts cannot be matched."""
    fresh = optimizer.state_dict()
    now, before = layout_of(optimizer), saved_layout(saved)
    if before is None or now is None:
        sizes_now, sizes_before = (
            [len(g["params"]) for g in fresh["param_groups"]],
            [len(g["params"]) for g in saved["param_groups"]],
        )
        if sizes_now != sizes_before:
            raise CheckpointError(
                f"cannot resume from '{source}': its optimizer has parameter groups of sizes {sizes_before}, this run's {sizes_now}, "
                f"and the checkpoint does not name its parameters (an older version wrote it); {RESET_WAY}"
            )
        state = dict(saved["state"])
    else:
        state = _moved_by_name(saved, before, now)
    optimizer.load_state_dict({"state": state, "param_groups": fresh["param_groups"]})


def _moved_by_name(saved: Dict[str, Any], before: Layout, now: Layout) -> Dict[int, Any]:
    """``saved``'s per-parameter state renumbered from the layout ``before`` to ``now``."""
    index = {name: i for i, name in enumerate(_flat(before))}
    ids = [p for group in saved["param_groups"] for p in group["params"]]  # the saved numbering, in layout order
    state: Dict[int, Any] = {}
    new: List[str] = []
    for position, name in enumerate(_flat(now)):
        if name not in index:
            new.append(name)
        elif ids[index[name]] in saved["state"]:
            state[position] = saved["state"][ids[index[name]]]
    dropped = sorted(set(index) - set(_flat(now)))
    if new:
        log.warning(
            "%d parameter(s) have no optimizer state in the checkpoint (now trainable: model.freeze changed); their state starts empty: %s",
            len(new),
            ", ".join(new[:8]) + (" ..." if len(new) > 8 else ""),
        )
    if dropped:
        log.info(
            "the optimizer state of %d parameter(s) no longer trained is dropped: %s",
            len(dropped),
            ", ".join(dropped[:8]) + (" ..." if len(dropped) > 8 else ""),
        )
    if before != now and not new and not dropped:
        log.info(
            "optimizer state moved by parameter name into the new grouping (%d groups -> %d)", len(before), len(now)
        )
    return state


def check_sharded_layout(before: Optional[Layout], now: Optional[Layout], source: str) -> None:
    """A sharded checkpoint's optimizer state loads into the same grouping only (DCP matches groups by position)."""
    if before is not None and now is not None and before != now:
        raise CheckpointError(
            f"cannot resume from '{source}': the optimizer's parameter groups changed, which a sharded (dist.mode=fsdp) checkpoint cannot follow; {RESET_WAY}"
        )
