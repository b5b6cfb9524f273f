"""Where a run's weights come from, in this order: resume checkpoint, model.pretrained, the network's init."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from torch import nn

from utils.checkpoint.start_point import StartPoint
from utils.checkpoint.state import Checkpoint
from utils.checkpoint.weights import PRETRAINED_WAY_OUT, MinShare, check_values, load_weights, weight_mismatch
from utils.config.schema import ModelConfig
from utils.errors import CheckpointError

log = logging.getLogger(__name__)


def load_initial_weights(model: nn.Module, cfg: ModelConfig, start: Optional[StartPoint]) -> None:
    """Initialise ``model`` (not yet wrapped) and log where its weights came from.

    1. a resumed run's checkpoint (``start``, guarded already): all of its weights (the rest of its state is
       restored by ``Trainer.start_from`` once the optimizer and the trainer exist);
    2. ``model.pretrained``: a checkpoint of ours or a plain state_dict, with
       ``model.pretrained_prefix``; tensors whose shapes differ (a new head) are
       dropped and keep the network's init, unless ``model.pretrained_strict``;
    3. otherwise the network's own initialisation.
    """
    if start is not None:
        checkpoint, resume_path = start.checkpoint, start.path
        check_values(model.state_dict(), checkpoint.model_weights, str(resume_path))
        try:
            model.load_state_dict(checkpoint.model_weights)
        except RuntimeError as err:
            raise CheckpointError(
                f"cannot resume from '{resume_path}': its weights do not fit network '{cfg.name}' ({weight_mismatch(model, checkpoint.model_weights)}); move it away to start afresh"
            ) from err
        log.info(
            "weights: resumed from %s (epoch %s)%s",
            resume_path,
            checkpoint.progress.epoch,
            "; model.pretrained is not used" if cfg.pretrained else "",
        )
        return
    loaded = backbone_file(cfg)
    if cfg.pretrained:
        over = f", over the backbone's pretrained file {loaded}" if loaded else ""
        log.info(
            "weights: model.pretrained=%s (prefix '%s', strict %s%s)",
            cfg.pretrained,
            cfg.pretrained_prefix,
            cfg.pretrained_strict,
            over,
        )
        load_weights(
            model,
            cfg.pretrained,
            cfg.pretrained_prefix,
            cfg.pretrained_strict,
            MinShare(cfg.pretrained_min_share, PRETRAINED_WAY_OUT),
        )
        return
    if loaded:  # the backbone read its own file while the network was built (its "loaded N tensors" line)
        log.info(
            "weights: the network's initialisation, with the backbone's pretrained file %s loaded by the backbone (no checkpoint to resume, no model.pretrained)",
            loaded,
        )
    else:
        log.info("weights: the network's own initialisation (no checkpoint to resume, no model.pretrained)")


def backbone_file(cfg: ModelConfig) -> Optional[str]:
    """The file the network's backbone loads itself (``model.args.backbone_args.pretrained``), if any."""
    backbone_args = cfg.args.get("backbone_args") if isinstance(cfg.args, dict) else None
    pretrained = backbone_args.get("pretrained") if isinstance(backbone_args, dict) else None
    return str(pretrained) if isinstance(pretrained, (str, Path)) and pretrained else None


def load_eval_weights(model: nn.Module, path: Path) -> None:
    """Load the weights checkpoint ``path`` evaluated with into the trained ``model`` (wrapped or sharded):
    a sharded checkpoint's shards into the sharded model (a collective), a file's into the unwrapped network."""
    from utils.distributed.fsdp import is_sharded
    from utils.distributed.parallel import unwrap

    checkpoint = Checkpoint.load(path)
    if checkpoint.shards is None or not is_sharded(model):
        check_values(unwrap(model).state_dict(), checkpoint.eval_weights, str(path))
        unwrap(model).load_state_dict(checkpoint.eval_weights)
        return
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    from utils.checkpoint.dcp_safe import load_into

    state = {"model": get_model_state_dict(model)}
    load_into(state, checkpoint.shards)  # dcp.load without running code (restricted .metadata, weights-only entries)
    set_model_state_dict(model, state["model"])
