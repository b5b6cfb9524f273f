"""Resume guards: a checkpoint continues only the run it was written by.

Resuming with another model or another data shape silently trains something
else (and a mid-epoch resume would skip the wrong samples), so those config
keys must match; ``--resume-force`` overrides. The world size may change when
the run keeps its global batch (``data.global_batch_size``, the same in both):
the data order is then the same at every world size.
"""

from __future__ import annotations

import logging
from typing import Any, Dict, List, Mapping

from utils.checkpoint.state import Checkpoint
from utils.errors import CheckpointError
from utils.typed_merge import lookup

log = logging.getLogger(__name__)

# What fixes the network's parameters and the data each step sees.
GUARDED = ("model.name", "model.args", "model.input_size", "data.name", "data.args", "data.batch_size", "data.global_batch_size", "seed")


def _leaves(value: Any, prefix: str) -> Dict[str, Any]:
    if isinstance(value, Mapping) and value:
        out: Dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_leaves(sub, f"{prefix}.{key}"))
        return out
    return {prefix: list(value) if isinstance(value, tuple) else value}


def _world_change(saved: Mapping[str, Any], current: Mapping[str, Any], saved_world: int, world_size: int) -> str:
    old, new = lookup(saved, "data.batch_size", None), lookup(current, "data.batch_size", None)
    change = f"world size: {saved_world} -> {world_size}"
    if lookup(saved, "data.global_batch_size", None) is not None or not isinstance(old, int) or not isinstance(new, int):
        return change
    return (
        f"{change}, which changes the global batch from {saved_world} x {old} = {saved_world * old} to {world_size} x {new} = {world_size * new} samples "
        f"(resume with {saved_world} processes; a run started with data.global_batch_size resumes on any world size that divides it)"
    )


def config_differences(saved: Mapping[str, Any], current: Mapping[str, Any], saved_world: Any, world_size: int) -> List[str]:
    """``"key: checkpoint value -> current value"`` for every guarded key that differs.

    With the same ``data.global_batch_size`` in both, the per-process batch and the
    world size are free: they only say how the same global batches are split.
    """
    global_batch = lookup(saved, "data.global_batch_size", None)
    kept = global_batch is not None and global_batch == lookup(current, "data.global_batch_size", None)
    diffs = []
    for key in GUARDED:
        if kept and key == "data.batch_size":
            continue
        old, new = _leaves(lookup(saved, key, None), key), _leaves(lookup(current, key, None), key)
        for leaf in sorted(set(old) | set(new)):
            if old.get(leaf) != new.get(leaf):
                diffs.append(f"{leaf}: {old.get(leaf)!r} -> {new.get(leaf)!r}")
    if saved_world is not None and saved_world != world_size and not kept:
        diffs.append(_world_change(saved, current, saved_world, world_size))
    return diffs


def resume_differences(checkpoint: Checkpoint, current: Mapping[str, Any], world_size: int) -> List[str]:
    """The guarded differences between a checkpoint's run and this one (none for a checkpoint without a config)."""
    saved = checkpoint.config
    return config_differences(saved, current, checkpoint.world_size, world_size) if saved is not None else []


def check_resume_config(checkpoint: Checkpoint, current: Mapping[str, Any], world_size: int, force: bool) -> bool:
    """CheckpointError naming the differing keys, unless ``force`` (then a warning).

    Returns True when the data order of the checkpoint still holds (nothing differs).
    """
    diffs = resume_differences(checkpoint, current, world_size)
    if not diffs:
        return True
    listing = "; ".join(diffs)
    if not force:
        raise CheckpointError(f"cannot resume from '{checkpoint.source}': the config changed the model or the data ({listing}); restore these keys, use another experiment.name, or pass --resume-force")
    log.warning("--resume-force: resuming '%s' although %s", checkpoint.source, listing)
    return False
