"""Build the configured network through the ``NETWORKS`` registry, ready for the rest of the run."""

from __future__ import annotations

from torch import nn

from utils.config.schema import ModelConfig
from utils.errors import ConfigError
from utils.model.lazy import materialize
from utils.registry import NETWORKS


def build_network(cfg: ModelConfig) -> nn.Module:
    """The configured network with its lazy modules materialized and gradient checkpointing switched as asked."""
    model = NETWORKS.build(cfg.name, **cfg.args)
    materialize(model, cfg.input_size, cfg.name)
    if cfg.grad_checkpointing:
        if not hasattr(model, "set_grad_checkpointing"):
            raise ConfigError(
                f"network '{cfg.name}' has no set_grad_checkpointing(); set model.grad_checkpointing=false"
            )
        model.set_grad_checkpointing(True)
    return model
