"""Where a run's weights come from, in this order: resume checkpoint, model.pretrained, the network's init."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Optional

from torch import nn

from utils.checkpoint.state import Checkpoint
from utils.checkpoint.store import CheckpointStore, load_verified
from utils.checkpoint.weights import load_weights, weight_mismatch
from utils.config import ModelConfig
from utils.distributed.ops import barrier, broadcast_object, get_rank
from utils.errors import CheckpointError

log = logging.getLogger(__name__)


def find_resume(ckpt_dir: Path, resume: bool, auto_resume: bool) -> Optional[Path]:
    """The newest usable checkpoint when ``--resume`` asks for one (it must exist) or
    ``train.auto_resume`` finds one; a corrupt newest file falls back to the one before.

    Every rank takes rank 0's answer, after a barrier, so all resume from the same
    file and none reads one that is still being written.
    """
    if not (resume or auto_resume):
        return None
    barrier()
    found = None
    if get_rank() == 0:
        latest = CheckpointStore(Path(ckpt_dir)).latest_usable()
        found = str(latest) if latest else None
    found = broadcast_object(found)
    if found is not None:
        return Path(found)
    if resume:
        raise CheckpointError(f"--resume: no checkpoint in '{ckpt_dir}'; train without --resume first")
    return None


def init_weights(model: nn.Module, cfg: ModelConfig, resume_path: Optional[Path], guard: Optional[Callable[[Checkpoint], Any]] = None) -> Optional[Checkpoint]:
    """Initialise ``model`` (not yet wrapped) and log where its weights came from.

    1. a resume checkpoint: all of its weights (the rest of its state is
       restored by ``Checkpoint.restore`` once the optimizer and hooks exist);
    2. ``model.pretrained``: a checkpoint of ours or a plain state_dict, with
       ``model.pretrained_prefix``; tensors whose shapes differ (a new head) are
       dropped and keep the network's init, unless ``model.pretrained_strict``;
    3. otherwise the network's own initialisation.

    ``guard(checkpoint)`` checks a resume checkpoint before its weights are loaded.
    Returns the resume checkpoint, or None.
    """
    if resume_path is not None:
        checkpoint = Checkpoint(load_verified(Path(resume_path)), resume_path)
        if guard is not None:
            guard(checkpoint)
        try:
            model.load_state_dict(checkpoint.model_weights)
        except RuntimeError as err:
            raise CheckpointError(f"cannot resume from '{resume_path}': its weights do not fit network '{cfg.name}' ({weight_mismatch(model, checkpoint.model_weights)}); move it away to start afresh") from err
        log.info("weights: resumed from %s (epoch %s)%s", resume_path, checkpoint.progress.epoch, "; model.pretrained is not used" if cfg.pretrained else "")
        return checkpoint
    if cfg.pretrained:
        log.info("weights: model.pretrained=%s (prefix '%s', strict %s)", cfg.pretrained, cfg.pretrained_prefix, cfg.pretrained_strict)
        load_weights(model, cfg.pretrained, cfg.pretrained_prefix, cfg.pretrained_strict)
        return None
    log.info("weights: the network's own initialisation (no checkpoint to resume, no model.pretrained)")
    return None
