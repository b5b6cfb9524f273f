"""Freezing: parameters by name pattern, and BatchNorm layers as fixed affine transforms.

Both are applied before the optimizer is built, so frozen tensors never enter
it and stay bit-identical through training.
"""

from __future__ import annotations

import logging
import types
from typing import List, Sequence

from torch import nn

from utils.optim.patterns import check_patterns, matches

log = logging.getLogger(__name__)


def freeze_parameters(model: nn.Module, patterns: Sequence[str]) -> List[str]:
    """Set ``requires_grad=False`` on parameters whose full name matches a glob pattern.

    Patterns use ``fnmatch`` over names such as ``backbone.stages.0.0.weight``
    (``*`` also matches dots, so ``backbone.*`` is the whole backbone). A pattern
    that matches nothing is an error naming it: it is almost always a typo.
    """
    check_patterns([name for name, _ in model.named_parameters()], patterns, "model.freeze")
    frozen = []
    for name, param in model.named_parameters():
        if matches(name, patterns):
            param.requires_grad_(False)
            frozen.append(name)
    return frozen


def train(self: nn.Module, mode: bool = True) -> nn.Module:
    """``train()`` of a frozen BatchNorm: it stays in eval mode (running statistics fixed).

    Named ``train`` so that ``torch.save(model)`` pickles; a reloaded whole model needs apply_freeze again.
    """
    return nn.Module.train(self, False)


def freeze_batchnorm(model: nn.Module) -> int:
    """Put every BatchNorm layer in eval mode for good and freeze its affine parameters.

    ``model.train()`` reaches each child through ``child.train(mode)``; an
    instance-level ``train`` that always passes ``False`` keeps these layers in
    eval mode whatever the training loop calls, so the running statistics are
    used and never updated. Returns the number of layers frozen.
    """
    count = 0
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            for param in module.parameters(recurse=False):
                param.requires_grad_(False)
            module.train = types.MethodType(train, module)
            module.eval()
            count += 1
    return count


def apply_freeze(model: nn.Module, patterns: Sequence[str], freeze_bn: bool) -> None:
    """Freeze what ``model.freeze`` / ``model.freeze_bn`` ask for and log the trainable count."""
    frozen = freeze_parameters(model, patterns) if patterns else []
    if frozen:
        log.info("model.freeze %s: %d parameter tensors frozen", list(patterns), len(frozen))
    if freeze_bn:
        log.info(
            "model.freeze_bn: %d BatchNorm layers in eval mode with frozen affine parameters", freeze_batchnorm(model)
        )
    elif frozen:
        frozen_set = set(frozen)
        updating = [
            name
            for name, module in model.named_modules()
            if isinstance(module, nn.modules.batchnorm._BatchNorm)
            and module.weight is not None
            and f"{name}.weight" in frozen_set
        ]
        if updating:
            log.info(
                "%d frozen BatchNorm layers still update their running statistics in training; set model.freeze_bn=true to fix them too",
                len(updating),
            )
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    log.info("trainable parameters: %d of %d (%.1f%%)", trainable, total, 100.0 * trainable / max(total, 1))
