"""Resume guards: what a resumed run does with each setting that changed since its checkpoint.

Each config key's rule is written beside it in the schema (``utils/config/resume.py``):

- ``match`` keys fix the network's parameters or the data each step sees (``model.*``,
  ``data.name``, ``data.args`` but those its dataset declares inert, the batch, ``seed``): a change is refused, naming
  ``key: old -> new``; ``--resume-force`` accepts it (the interrupted epoch restarts).
  The world size may change when the run keeps its global batch (``data.global_batch_size``):
  the data order is then the same at every world size. The training data's identity (classes,
  sample count, file list: ``utils/data/identity.py``) must match too: ``data.root`` may move.
- ``optim.name`` (an ``apply`` key): the saved optimizer state belongs to one optimizer type;
  another type is refused unless ``--reset-optimizer`` drops that state.
- ``apply`` keys take effect from the resumed step (the optimizer, schedule and best tracker get
  the new values: ``utils/checkpoint/state.py``, ``utils/engine/validator.py``), ``inert`` ones do not
  touch training; both are logged as ``changed on resume: key old -> new``.
"""

from __future__ import annotations

import logging
from typing import Any, List, Mapping, NamedTuple, Optional

from utils.checkpoint.state import Checkpoint
from utils.config.resume import Change, changes
from utils.config.schema import Config
from utils.config.typed_merge import lookup
from utils.data.identity import identity_differences, order_change
from utils.errors import CheckpointError, UserError

log = logging.getLogger(__name__)

OPTIMIZER = "optim.name"


class ResumeChoices(NamedTuple):
    """What the user allowed on the command line: ``--resume-force``, ``--reset-optimizer``."""

    force: bool = False
    reset_optimizer: bool = False


def _world_change(saved: Mapping[str, Any], current: Mapping[str, Any], saved_world: int, world_size: int) -> str:
    old, new = lookup(saved, "data.batch_size", None), lookup(current, "data.batch_size", None)
    change = f"world size: {saved_world} -> {world_size}"
    if (
        lookup(saved, "data.global_batch_size", None) is not None
        or not isinstance(old, int)
        or not isinstance(new, int)
    ):
        return change
    return (
        f"{change}, which changes the global batch from {saved_world} x {old} = {saved_world * old} to {world_size} x {new} = {world_size * new} samples "
        f"(resume with {saved_world} processes; a run started with data.global_batch_size resumes on any world size that divides it)"
    )


def _global_batch_kept(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    kept = lookup(saved, "data.global_batch_size", None)
    return kept is not None and kept == lookup(current, "data.global_batch_size", None)


def _inert_data_args(current: Mapping[str, Any]) -> List[str]:
    """The ``data.args`` keys that the dataset declares do not change its samples (its class's ``INERT_ARGS``:
    where a cache lies and how large it is)."""
    from utils.registry import DATASETS

    name = lookup(current, "data.name", None)
    try:
        dataset = DATASETS.get(name) if isinstance(name, str) else None
    except UserError:  # an unknown dataset: the run's own start names it
        return []
    return [f"data.args.{name}" for name in getattr(dataset, "INERT_ARGS", ())]


def setting_changes(saved: Mapping[str, Any], current: Mapping[str, Any]) -> List[Change]:
    """Every changed key with its rule. With the same ``data.global_batch_size`` in both, the
    per-process batch is free: it only says how the same global batches are split; a dataset's
    inert ``data.args`` are inert."""
    kept, inert = _global_batch_kept(saved, current), _inert_data_args(current)
    found = [c for c in changes(Config, saved, current) if not (kept and c.key == "data.batch_size")]
    return [c._replace(rule="inert") if c.key in inert else c for c in found]


def config_differences(
    saved: Mapping[str, Any], current: Mapping[str, Any], saved_world: Any, world_size: int
) -> List[str]:
    """``"key: checkpoint value -> current value"`` for every ``match`` key that differs, and a world
    size change that changes the global batch."""
    diffs = [f"{c.key}: {c.old!r} -> {c.new!r}" for c in setting_changes(saved, current) if c.rule == "match"]
    if saved_world is not None and saved_world != world_size and not _global_batch_kept(saved, current):
        diffs.append(_world_change(saved, current, saved_world, world_size))
    return diffs


def check_resume(
    checkpoint: Checkpoint,
    current: Mapping[str, Any],
    data: Optional[Mapping[str, Any]],
    world_size: int,
    choices: ResumeChoices,
) -> bool:
    """Refuse a resume whose model, data or optimizer type changed (unless the user allowed it),
    log every other changed setting; True when the checkpoint's data order still holds."""
    drawn = order_change(checkpoint.data_identity, data)
    if drawn is not None:  # a checkpoint of an older version: its epoch cannot be continued sample for sample
        log.warning("'%s' drew its epochs as %s; this version draws them as %s", checkpoint.source, *drawn)
    saved = checkpoint.config
    if saved is None:
        return drawn is None
    found = setting_changes(saved, current)
    optimizer = [c for c in found if c.key == OPTIMIZER]
    if optimizer and not choices.reset_optimizer:
        raise CheckpointError(
            f"cannot resume from '{checkpoint.source}': optim.name changed {optimizer[0].old} -> {optimizer[0].new}, and the saved "
            f"{optimizer[0].old} state (its moments) does not fit {optimizer[0].new}; resume with optim.name={optimizer[0].old}, "
            "or pass --reset-optimizer to start the optimizer state afresh from the resumed weights"
        )
    _check_sharding(checkpoint, lookup(current, "dist.mode", None) == "fsdp")
    diffs = config_differences(saved, current, checkpoint.world_size, world_size) + identity_differences(
        checkpoint.data_identity, data
    )
    if diffs and not choices.force:
        raise CheckpointError(
            f"cannot resume from '{checkpoint.source}': the config changed the model or the data ({'; '.join(diffs)}); "
            "restore these keys, use another experiment.name, or pass --resume-force"
        )
    for change in found:
        if change.rule != "match":
            log.info("changed on resume: %s%s", change, "" if change.rule == "apply" else " (does not touch training)")
    if diffs:
        log.warning("--resume-force: resuming '%s' although %s", checkpoint.source, "; ".join(diffs))
    return not diffs and drawn is None


def _check_sharding(checkpoint: Checkpoint, sharding: bool) -> None:
    """A sharded checkpoint resumes under dist.mode=fsdp only, a single file under ddp or dp only."""
    sharded = checkpoint.shards is not None
    if sharded != sharding:
        raise CheckpointError(
            f"cannot resume from '{checkpoint.source}': it is a {'sharded' if sharded else 'single-file'} checkpoint, "
            f"but this run has dist.mode={'fsdp' if sharding else 'ddp/dp'}; resume with the dist.mode it was written with"
            + (
                " (or turn it into one file with python -m utils.checkpoint.convert and --resume that file)"
                if sharded
                else ""
            )
        )
