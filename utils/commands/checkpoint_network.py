"""The network of a checkpoint as its run evaluated it, for every mode that reads a checkpoint (test, predict,
export)."""

from __future__ import annotations

from typing import Tuple

import torch
from torch import nn

from utils.amp import Amp
from utils.checkpoint.state import Checkpoint
from utils.checkpoint.weights import check_values, weight_mismatch
from utils.config.schema import Config
from utils.errors import CheckpointError
from utils.model.build import build_network
from utils.model.memory_format import to_channels_last


def checkpoint_network(cfg: Config, checkpoint: Checkpoint, device: torch.device) -> Tuple[nn.Module, Amp]:
    """The network with the weights the run evaluated with (the EMA's when it selected with them),
    on ``device``, at the precision it was trained with."""
    model = build_network(cfg.model)
    check_values(model.state_dict(), checkpoint.eval_weights, str(checkpoint.source))
    try:
        model.load_state_dict(checkpoint.eval_weights)
    except RuntimeError as err:
        raise CheckpointError(
            f"checkpoint '{checkpoint.source}' does not fit network '{cfg.model.name}' ({weight_mismatch(model, checkpoint.eval_weights)}); "
            "it was saved by another network, see the config it was saved with"
        ) from err
    model.to(device)
    if cfg.model.channels_last:
        to_channels_last(model)
    amp = Amp(cfg.amp, device)
    model, _ = amp.initialize(model)
    return model, amp
