"""Optimizers over parameter groups: no decay on norms and biases, LR multipliers by name pattern, layer-wise LR decay."""

from __future__ import annotations

import logging
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from utils.config.schema import OptimConfig
from utils.errors import ConfigError
from utils.optim.impl import impl_options, keep_impl, resolve_impl
from utils.optim.patterns import check_patterns, matches

log = logging.getLogger(__name__)


def is_no_decay(name: str, param: torch.Tensor) -> bool:
    """Biases and normalization weights (1-d tensors) are not weight-decayed."""
    return param.ndim <= 1 or name.endswith(".bias")


GROUP_KEYS = ("pattern", "lr_mult", "weight_decay")


def layer_id_fn(model: nn.Module) -> Tuple[Callable[[str], int], int]:
    """``(layer_id(name), num_layers)`` for layer-wise LR decay.

    The network's own ``layer_id`` / ``num_layers`` when it has them; otherwise,
    for a network following the ``self.backbone`` convention, the backbone's ids
    for ``backbone.*`` and ``num_layers`` (the full LR) for everything else.
    """
    if hasattr(model, "layer_id") and hasattr(model, "num_layers"):
        return model.layer_id, int(model.num_layers)
    backbone = getattr(model, "backbone", None)
    if backbone is not None and hasattr(backbone, "layer_id") and hasattr(backbone, "num_layers"):
        top = int(backbone.num_layers)
        return (lambda name: backbone.layer_id(name[len("backbone.") :]) if name.startswith("backbone.") else top), top
    raise ConfigError(
        f"optim.layer_decay needs layer ids, but network {type(model).__name__} has no layer_id(name)/num_layers "
        "and no self.backbone with them; add them to the network or unset optim.layer_decay"
    )


def _patterns(spec: Dict[str, Any]) -> List[str]:
    """A group's ``pattern``: one glob or a list of them."""
    return [spec["pattern"]] if isinstance(spec["pattern"], str) else list(spec["pattern"])


def _match_group(name: str, specs: Sequence[Dict[str, Any]]) -> int:
    """Index of the first spec whose pattern(s) match ``name``; -1 for the default group."""
    for index, spec in enumerate(specs):
        if matches(name, _patterns(spec)):
            return index
    return -1


def _group_value_problem(key: str, value: Any) -> Optional[str]:
    """What a ``param_groups`` entry's value must be, or None when it fits."""
    if key == "pattern":
        strings = [value] if isinstance(value, str) else value if isinstance(value, list) else None
        ok = bool(strings) and all(isinstance(p, str) and p for p in strings)
        return None if ok else "a name pattern or a non-empty list of them (e.g. 'backbone.*' or ['head.*', '*.bias'])"
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    # a negative LR multiplier trains by gradient ascent; a negative decay pushes weights away from 0
    return None if number and value >= 0 else "a finite number >= 0"


def check_group_keys(specs: Sequence[Dict[str, Any]]) -> None:
    """Every ``optim.param_groups`` entry has a pattern, known keys and values of their type and range
    (checked with the config, before the model exists)."""
    for index, spec in enumerate(specs):
        unknown = sorted(set(spec) - set(GROUP_KEYS))
        if "pattern" not in spec or unknown:
            raise ConfigError(
                f"optim.param_groups[{index}] = {spec!r}: needs 'pattern' and takes only {list(GROUP_KEYS)}"
                + (f"; unknown {unknown}" if unknown else "")
            )
        for key, value in spec.items():
            problem = _group_value_problem(key, value)
            if problem is not None:
                raise ConfigError(f"config key 'optim.param_groups[{index}].{key}' must be {problem}, got {value!r}")


def check_group_specs(model: nn.Module, specs: Sequence[Dict[str, Any]]) -> None:
    """Every ``optim.param_groups`` entry has a pattern and known keys, each pattern matches a parameter, and
    each entry claims a parameter no earlier entry took (a parameter goes to the first match: an entry
    whose every match is taken would have its settings ignored in silence)."""
    check_group_keys(specs)
    names = [name for name, _ in model.named_parameters()]
    for index, spec in enumerate(specs):
        check_patterns(names, _patterns(spec), f"optim.param_groups[{index}]")
    owner = {name: _match_group(name, specs) for name in names}
    for index, spec in enumerate(specs):
        matched = [name for name in names if matches(name, _patterns(spec))]
        if any(owner[name] == index for name in matched):
            continue
        earlier = sorted({owner[name] for name in matched})
        taken_by = " and ".join(f"optim.param_groups[{i}] (pattern {specs[i]['pattern']!r})" for i in earlier)
        raise ConfigError(
            f"optim.param_groups[{index}] (pattern {spec['pattern']!r}) claims no parameter, so its settings would be ignored: every parameter it "
            f"matches ({len(matched)}, e.g. {matched[0]}) is taken by the earlier {taken_by}, since a parameter goes to the first group that matches; "
            "merge the groups into one, remove this one, or narrow the earlier pattern"
        )


def param_groups(
    model: nn.Module,
    weight_decay: float,
    lr: float = 1.0,
    specs: Sequence[Dict[str, Any]] = (),
    layer_decay: Optional[float] = None,
) -> List[Dict[str, Any]]:
    """Trainable parameters (frozen ones left out) grouped for the optimizer.

    Each parameter goes to the first ``specs`` entry whose glob ``pattern``
    matches its name (``lr_mult``, ``weight_decay`` override the defaults) or to
    the default group; biases and norm weights never get weight decay; with
    ``layer_decay`` the LR of layer ``i`` is multiplied by
    ``layer_decay ** (num_layers - i)``. Every group carries its own ``lr``,
    which the scheduler multiplies by a common factor, ``lr_scale``, its
    ratio to ``lr``, and ``names``, its parameters' names.
    """
    check_group_specs(model, specs)
    layer_id, num_layers = layer_id_fn(model) if layer_decay is not None else (None, 0)
    groups: Dict[Tuple[int, int, bool], Dict[str, Any]] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        index = _match_group(name, specs)
        spec = specs[index] if index >= 0 else {}
        layer = layer_id(name) if layer_id is not None else num_layers
        no_decay = is_no_decay(name, param)
        key = (index, layer, no_decay)
        if key not in groups:
            scale = float(spec.get("lr_mult", 1.0))
            if layer_decay is not None:
                scale *= layer_decay ** (num_layers - layer)
            decay = 0.0 if no_decay else float(spec.get("weight_decay", weight_decay))
            label = f"{'default' if index < 0 else spec['pattern']}/layer{layer}/{'no_decay' if no_decay else 'decay'}"
            groups[key] = {
                "params": [],
                "names": [],
                "lr": lr * scale,
                "lr_scale": scale,
                "weight_decay": decay,
                "group": label,
            }
        groups[key]["params"].append(param)
        groups[key]["names"].append(name)  # checkpoints keep them: a resume maps the optimizer state by name
    return list(groups.values())


def scaled_lr(lr: float, rule: str, world_size: int) -> float:
    """``linear``: lr * world_size; ``sqrt``: lr * sqrt(world_size) (the global batch grows with ranks)."""
    return {"none": lr, "linear": lr * world_size, "sqrt": lr * math.sqrt(world_size)}[rule]


def build_optimizer(model: nn.Module, cfg: OptimConfig, world_size: int = 1) -> torch.optim.Optimizer:
    """The configured optimizer over ``model``'s trainable parameters (see ``param_groups``)."""
    lr = scaled_lr(cfg.lr, cfg.lr_scaling, world_size)
    groups = param_groups(model, cfg.weight_decay, lr, cfg.param_groups, cfg.layer_decay)
    if not groups:
        raise ConfigError("no trainable parameters: model.freeze froze everything; loosen the patterns")
    if cfg.param_groups or cfg.layer_decay is not None:
        for group in groups:
            log.info(
                "param group %s: %d tensors, lr %.3g (x%.4g), weight_decay %g",
                group["group"],
                len(group["params"]),
                group["lr"],
                group["lr_scale"],
                group["weight_decay"],
            )
    impl = resolve_impl(cfg.impl, [p for g in groups for p in g["params"]])
    options = impl_options(impl)
    if cfg.name == "sgd":
        optimizer: torch.optim.Optimizer = torch.optim.SGD(
            groups, lr=lr, momentum=cfg.momentum, nesterov=cfg.nesterov, **options
        )
    elif cfg.name == "adam":
        optimizer = torch.optim.Adam(groups, lr=lr, betas=tuple(cfg.betas), **options)
    else:  # adamw: the schema allows these three names only
        optimizer = torch.optim.AdamW(groups, lr=lr, betas=tuple(cfg.betas), **options)
    keep_impl(optimizer, impl)
    log.info("optimizer %s (%s implementation%s)", cfg.name, impl, ", optim.impl=auto" if cfg.impl == "auto" else "")
    return optimizer
