"""What ``main.py`` hands the Trainer beside the parts it builds, read from the config: the hooks, the
services (run writer, checkpointer, validator), the loop's options and the run meta that checkpoints keep.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from utils.checkpoint.stores import open_checkpoint_store
from utils.config.schema import Config, to_dict
from utils.data.identity import data_identity
from utils.distributed.process_group import DistInfo
from utils.engine.checkpointer import CheckpointSettings
from utils.engine.trainer_types import LoopOptions, RunMeta, Services
from utils.engine.validator import ValidationSettings
from utils.hook.profiler import ProfilerHook
from utils.hook.progress import ProgressHook
from utils.hook.selection import task_hooks
from utils.log import RunWriter
from utils.run.folder import RunFolder


def build_hooks(cfg: Config, run: RunFolder, training: bool) -> List[Any]:
    """The progress bar and the profiler (training), then the task's default hooks and the users'
    as ``cfg.hooks`` sets them (order: utils/hook/)."""
    hooks: List[Any] = [ProgressHook(cfg.train.log_every)] if training else []
    if training and cfg.train.profile:
        hooks.append(ProfilerHook(str(run.profile), **cfg.train.profile))
    return hooks + task_hooks(cfg.eval.metric, cfg.hooks)


def build_services(
    cfg: Config,
    info: DistInfo,
    run: RunFolder,
    val_loader: Any,
    direction: str,
    judge: Optional[Callable[[int, Dict[str, float], str], bool]] = None,
) -> Services:
    """The run writer, the checkpointer and the validator, from their config keys (``direction``:
    ``StartPlan.monitor_mode``; ``judge``: a sweep's pruner, asked after each validation)."""
    store = open_checkpoint_store(run.checkpoints, cfg.train.keep_checkpoints, sharded=cfg.dist.mode == "fsdp")
    return Services(
        writer=RunWriter(run, info.is_main),
        checkpoints=CheckpointSettings(store, cfg.train.checkpoint_every_steps, cfg.train.async_checkpoint),
        validation=ValidationSettings(
            val_loader,
            cfg.eval.every,
            cfg.eval.monitor,
            direction,
            cfg.train.patience,
            cfg.eval.use_ema,
            judge,
        ),
        samples=run.samples if cfg.train.record_samples and info.is_main else None,
    )


def loop_options(cfg: Config, epochs: int, total_steps: int) -> LoopOptions:
    """The loop's settings from the config: length, accumulation, clipping, the non-finite policy."""
    # A step budget only when the length is given in steps: an epoch-based run resumed with
    # another train.accumulate has a different step count per epoch and still runs its epochs.
    return LoopOptions(
        epochs=epochs,
        step_limit=total_steps if cfg.train.iterations is not None else None,
        accumulate=cfg.train.accumulate,
        clip_grad_norm=cfg.train.clip_grad_norm,
        clip_grad_value=cfg.train.clip_grad_value,
        nonfinite=cfg.train.nonfinite,
        max_nonfinite_skips=cfg.train.max_nonfinite_skips,
        log_every=cfg.train.log_every,
        sync_every=cfg.train.sync_every,
    )


def run_meta(cfg: Config, data: Any) -> RunMeta:
    """The resolved config, the training ``data``'s classes and identity: what checkpoints keep."""
    return RunMeta(
        to_dict(cfg), getattr(data, "classes", None), getattr(data, "num_classes", None), data_identity(data)
    )
