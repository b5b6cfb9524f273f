"""Where a run's weights come from, in this order: resume checkpoint, model.pretrained, the network's init."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from torch import nn

from utils.checkpoint import CheckpointError, load_file, load_weights
from utils.config import ModelConfig
from utils.control import BestTracker
from utils.dist import barrier, broadcast_object
from utils.ema import ModelEma

log = logging.getLogger(__name__)


def find_resume(ckpt_dir: Path, resume: bool, auto_resume: bool) -> Optional[Path]:
    """``last.pt`` when ``--resume`` asks for it (it must exist) or ``train.auto_resume`` finds it.

    Every rank takes rank 0's answer, after a barrier, so all resume from the same
    file and none reads one that is still being written.
    """
    last = Path(ckpt_dir) / "last.pt"
    if not (resume or auto_resume):
        return None
    barrier()
    if broadcast_object(last.is_file()):
        return last
    if resume:
        raise CheckpointError(f"--resume: no checkpoint at '{last}'; train without --resume first")
    return None


def init_weights(model: nn.Module, cfg: ModelConfig, resume_path: Optional[Path]) -> Optional[Dict[str, Any]]:
    """Initialise ``model`` (not yet wrapped) and log where its weights came from.

    1. a resume checkpoint: all of its weights (the rest of its state is
       restored by ``restore_training_state`` once the optimizer exists);
    2. ``model.pretrained``: a checkpoint of ours or a plain state_dict, with
       ``model.pretrained_prefix``; tensors whose shapes differ (a new head) are
       dropped and keep the network's init, unless ``model.pretrained_strict``;
    3. otherwise the network's own initialisation.

    Returns the resume checkpoint, or None.
    """
    if resume_path is not None:
        state = load_file(resume_path)
        try:
            model.load_state_dict(state["model"])
        except (KeyError, RuntimeError) as err:
            raise CheckpointError(f"cannot resume from '{resume_path}': it does not fit network '{cfg.name}' ({str(err).splitlines()[0]}); move it away to start afresh") from err
        log.info("weights: resumed from %s (epoch %s)%s", resume_path, state.get("epoch"), "; model.pretrained is not used" if cfg.pretrained else "")
        return state
    if cfg.pretrained:
        log.info("weights: model.pretrained=%s (prefix '%s', strict %s)", cfg.pretrained, cfg.pretrained_prefix, cfg.pretrained_strict)
        load_weights(model, cfg.pretrained, cfg.pretrained_prefix, cfg.pretrained_strict)
        return None
    log.info("weights: the network's own initialisation (no checkpoint to resume, no model.pretrained)")
    return None


def restore_training_state(state: Dict[str, Any], optimizer: Any, scheduler: Any, amp: Any, ema: Optional[ModelEma], tracker: BestTracker) -> Tuple[int, int]:
    """Optimizer, scheduler, amp, EMA and best-so-far from a resume checkpoint; returns (epoch, global step)."""
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    amp.load_state_dict(state["amp"])
    if ema is not None:
        if state.get("ema") is not None:
            ema.load_state_dict(state["ema"], state.get("ema_updates", 0))
        else:
            log.warning("the resume checkpoint has no EMA weights; the average starts from the resumed weights")
    tracker.load_state_dict(state["best"])
    log.info("training state restored: epoch %d, step %d", state["epoch"], state["global_step"])
    return state["epoch"], state["global_step"]
