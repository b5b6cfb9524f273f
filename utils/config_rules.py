"""What types alone cannot say about a config: ranges, and keys that must agree.

Each rule is written once. Choices are ``Literal`` types in the schema
(``utils/config.py``), checked with the types when a value is merged
(``utils/typed_merge.py``); ranges are the ``rule``/``at_least``/``above``
metadata beside their fields. ``validate`` runs when the config is loaded,
before any data is read: every field's rule (one ``ConfigError`` naming the
key, what it must be and what it is), then the keys that refer to each other.
Builders trust the validated config. Names that the
registries resolve (networks, datasets, metrics and the names a metric reports)
are checked right after, by ``utils/references.py``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import typing
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from utils.errors import ConfigError

if TYPE_CHECKING:
    from utils.config import Config

Test = Callable[[Any], bool]


def rule(test: Test, what: str) -> Dict[str, Any]:
    """Field metadata: ``test(value)`` must hold, else ``config key '<key>' must be <what>``.

    Ranges live beside their fields in ``utils/config.py``; choices are ``Literal`` types there,
    checked with the types (``utils/typed_merge.py``).
    """
    return {"rule": (test, what)}


def at_least(low: float, note: str = "", null: bool = False) -> Dict[str, Any]:
    """``>= low`` (``or null`` with ``null``), with an optional note in the message."""
    what = f">= {low}" + (" or null" if null else "") + (f" ({note})" if note else "")
    return rule(lambda v: (null and v is None) or (v is not None and v >= low), what)


def above(low: float, null: bool = False) -> Dict[str, Any]:
    """``> low`` (``or null`` with ``null``)."""
    return rule(
        lambda v: (null and v is None) or (v is not None and v > low), f"> {low}" + (" or null" if null else "")
    )


# how a mapping-valued key is written, for the message of a value of another type (train.ema=true)
MAPPING_EXAMPLES = {
    "train.ema": "{decay: 0.9998}",
    "train.compile": "{mode: default, fullgraph: false}",
    "train.profile": "{wait: 1, warmup: 1, active: 5}",
    "model.args": "{num_classes: 10}",
    "data.args": "{size: 16}",
}

PATH = {"path": True}  # field metadata: a file system path, ``~`` expanded when the config loads


def plain_name(value: str) -> bool:
    """A name usable as one folder: not empty, no separator, not ``.``/``..``, at most 200 bytes."""
    return (
        bool(value) and not re.search(r"[/\\\x00]", value) and value not in (".", "..") and len(value.encode()) <= 200
    )


def expand_paths(section: Any) -> None:
    """``~`` and ``~user`` expanded in every path field (``PATH`` metadata), in place."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            expand_paths(value)
        elif f.metadata.get("path") and isinstance(value, str):
            setattr(section, f.name, os.path.expanduser(value))


_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def validate(cfg: "Config") -> None:
    """Every field's rule, then every cross-key reference; ConfigError at the first problem."""
    _check_rules(cfg, "")
    _validate_lists(cfg)
    _validate_references(cfg)


def takes_floats(tp: Any) -> bool:
    """Whether the type ``tp`` holds floats (``float``, ``Optional[float]``, ``List[float]``, ...)."""
    return tp is float or any(takes_floats(arg) for arg in typing.get_args(tp))


def not_finite(value: Any) -> bool:
    """A float that is inf or NaN, also inside a list (``data.mean: [.nan]``)."""
    if isinstance(value, (list, tuple)):
        return any(not_finite(v) for v in value)
    return isinstance(value, float) and not math.isfinite(value)


def _check_rules(section: Any, prefix: str) -> None:
    hints = typing.get_type_hints(type(section))
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            _check_rules(value, f"{prefix}{f.name}.")
            continue
        # every float key, whatever its range: inf and NaN pass ``>=`` tests or poison the run silently
        if takes_floats(hints[f.name]) and not_finite(value):
            what = "hold finite numbers only" if isinstance(value, (list, tuple)) else "be a finite number"
            raise ConfigError(f"config key '{prefix}{f.name}' must {what}, got {value!r}")
        if "rule" in f.metadata:
            test, what = f.metadata["rule"]
            if not test(value):
                raise ConfigError(f"config key '{prefix}{f.name}' must be {what}, got {value!r}")


def _validate_lists(cfg: "Config") -> None:
    """Entries of list-valued keys: losses and hooks by name, importable module paths, the loss scale."""
    if not cfg.loss:
        raise ConfigError(
            "config key 'loss' is empty: training needs at least one loss; give one, e.g. loss=[{name: cross_entropy}]"
        )
    for i, item in enumerate(cfg.loss):
        if not isinstance(item.get("name"), str):
            raise ConfigError(
                f"config key 'loss[{i}]' needs a 'name' (e.g. {{name: cross_entropy, weight: 1.0}}), got {item!r}"
            )
        weight = item.get("weight", 1.0)
        # NaN passes ``< 0`` and inf poisons the sum: either would surface later as a misleading "loss is nan"
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not math.isfinite(weight) or weight < 0:
            raise ConfigError(f"config key 'loss[{i}].weight' must be a finite number >= 0, got {weight!r}")
        output = item.get("output")
        if output is not None and (isinstance(output, bool) or not isinstance(output, (int, str))):
            raise ConfigError(
                f"config key 'loss[{i}].output' must be an index of the network's tuple, a key of its dict, or all; got {output!r}"
            )
    for i, item in enumerate(cfg.hooks):
        if not isinstance(item.get("name"), str):
            raise ConfigError(f"config key 'hooks[{i}]' needs a 'name' (e.g. {{name: my_hook}}), got {item!r}")
        if not isinstance(item.get("enabled", True), bool):
            raise ConfigError(f"config key 'hooks[{i}].enabled' must be true or false, got {item['enabled']!r}")
    for i, item in enumerate(cfg.eval.extra_metrics):
        if not isinstance(item.get("name"), str):
            raise ConfigError(
                f"config key 'eval.extra_metrics[{i}]' needs a 'name' (a torchmetrics class, e.g. {{name: MulticlassF1Score, average: macro}}), got {item!r}"
            )
    for name in cfg.custom_imports:
        if not isinstance(name, str) or not _MODULE.match(name):
            dotted = re.sub(r"\.py$", "", str(name)).strip("/.").replace("/", ".")
            raise ConfigError(
                f"custom_imports: {name!r} is not a module path; give the module as you would import it (e.g. {dotted or 'my_package.my_module'}), with its folder on PYTHONPATH"
            )
    scale = cfg.amp.loss_scale
    if scale not in ("auto", "dynamic") and (isinstance(scale, str) or not 0 < scale < float("inf")):
        raise ConfigError(f"config key 'amp.loss_scale' must be auto, dynamic or a finite number > 0, got {scale!r}")


def _validate_references(cfg: "Config") -> None:
    """Keys that must agree with each other."""
    data, ema = cfg.data, cfg.train.ema
    if (data.mean is None) != (data.std is None) or (data.mean is not None and len(data.mean) != len(data.std)):
        raise ConfigError(
            f"config keys 'data.mean' and 'data.std' go together, one number per channel each; got {data.mean!r} and {data.std!r}"
        )
    channels = cfg.model.input_size[0] if cfg.model.input_size else None
    if data.mean is not None and channels is not None and len(data.mean) != channels:
        raise ConfigError(
            f"config key 'data.mean' has {len(data.mean)} value(s) but model.input_size={cfg.model.input_size} has {channels} channel(s); give one mean and std per channel"
        )
    if ema is not None:
        ema_settings(ema)
    if data.global_batch_size is not None and data.loader == "dali":
        raise ConfigError(
            "config key 'data.global_batch_size' needs data.loader=torch (DALI's readers shard and shuffle the data themselves); set data.loader=torch or data.global_batch_size=null"
        )
    if cfg.train.record_samples and data.loader == "dali":
        raise ConfigError(
            "config key 'train.record_samples' needs data.loader=torch (DALI's readers choose the order of the samples themselves); set data.loader=torch or train.record_samples=false"
        )
    if data.global_batch_size is not None and cfg.optim.lr_scaling != "none":
        raise ConfigError(
            f"config key 'optim.lr_scaling' is {cfg.optim.lr_scaling}, which scales the LR with the world size, but data.global_batch_size "
            "keeps the global batch the same at every world size; set optim.lr_scaling=none and give optim.lr for the global batch"
        )
    warmup, epochs = cfg.schedule.warmup_epochs, cfg.train.epochs
    if cfg.train.iterations is None and warmup > epochs:  # (a run given in steps is checked when its steps are known)
        raise ConfigError(
            f"config key 'schedule.warmup_epochs' is {warmup:g} but train.epochs is {epochs}: the warm-up would outlast the run, "
            f"so the LR would peak at its last step; set schedule.warmup_epochs to at most {epochs} (e.g. {min(1, epochs / 10):g}) or train longer"
        )
    if cfg.eval.use_ema and ema is None:
        raise ConfigError(
            "config key 'eval.use_ema' is true but train.ema is not set; set train.ema={decay: 0.9998} or eval.use_ema=false"
        )
    _validate_compile(cfg.train.compile)
    profile = cfg.train.profile
    if profile is not None:
        bad = sorted(set(profile) - {"wait", "warmup", "active"}) or [
            k
            for k, v in profile.items()
            if not isinstance(v, int) or isinstance(v, bool) or v < (1 if k == "active" else 0)
        ]
        if bad or "active" not in profile:
            raise ConfigError(
                f"config key 'train.profile' must look like {{wait: 1, warmup: 1, active: 5}} (wait, warmup >= 0, active >= 1), got {profile!r}"
            )


EMA_DECAY = 0.9998  # train.ema without a decay


def ema_settings(spec: Dict[str, Any]) -> Tuple[float, bool]:
    """``(decay, warmup)`` of ``train.ema: {decay: 0.9998, warmup: true}``; ConfigError for anything else."""
    unknown = sorted(set(spec) - {"decay", "warmup"})
    decay, warmup = spec.get("decay", EMA_DECAY), spec.get("warmup", True)
    if (
        unknown
        or not isinstance(decay, (int, float))
        or isinstance(decay, bool)
        or not 0.0 < decay < 1.0
        or not isinstance(warmup, bool)
    ):
        raise ConfigError(
            f"config key 'train.ema' must look like {{decay: 0.9998, warmup: true}} with 0 < decay < 1, got {spec!r}"
        )
    return float(decay), warmup


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
COMPILE_DEFAULTS: Dict[str, Any] = {"mode": "default", "backend": "inductor", "fullgraph": False, "dynamic": None}


def _validate_compile(spec: Any) -> None:
    options = {**COMPILE_DEFAULTS, **spec} if isinstance(spec, dict) else COMPILE_DEFAULTS
    unknown = sorted(set(options) - set(COMPILE_DEFAULTS))
    if (
        unknown
        or options["mode"] not in COMPILE_MODES
        or not isinstance(options["backend"], str)
        or not isinstance(options["fullgraph"], bool)
        or options["dynamic"] not in (None, True, False)
    ):
        example = "{mode: default, backend: inductor, fullgraph: false, dynamic: null}"
        raise ConfigError(
            f"config key 'train.compile' must be true, false/null or a mapping like {example} with mode one of {list(COMPILE_MODES)}, got {spec!r}"
        )


def compile_options(spec: Any) -> Optional[Dict[str, Any]]:
    """The ``torch.compile`` arguments of ``train.compile``, or None when it is off."""
    if spec is None or spec is False:
        return None
    return {**COMPILE_DEFAULTS, **(spec if isinstance(spec, dict) else {})}
