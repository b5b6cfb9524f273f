"""What types alone cannot say about a config: choices, ranges, and keys that must agree.

``validate`` runs when the config is loaded, before any data is read: every
value of the table below is checked (one ``ConfigError`` naming the key, what it
must be and what it is), then the keys that refer to each other. Names that the
registries resolve (networks, datasets, metrics and the names a metric reports)
are checked right after, by ``utils/references.py``.
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple

from utils.errors import ConfigError
from utils.typed_merge import lookup

if TYPE_CHECKING:
    from utils.config import Config

CHOICES = {
    "data.prefetch": ("none", "thread", "cuda", "auto"),
    "data.loader": ("torch", "dali"),
    "optim.name": ("sgd", "adam", "adamw"),
    "optim.lr_scaling": ("none", "linear", "sqrt"),
    "optim.impl": ("auto", "fused", "foreach", "loop"),
    "schedule.name": ("constant", "step", "cosine", "poly"),
    "eval.monitor_mode": ("max", "min"),
    "train.nonfinite": ("stop", "skip"),
    "amp.opt_level": ("O0", "O1", "O2", "O3"),
    "amp.backend": ("auto", "native", "apex"),
    "amp.dtype": ("auto", "float16", "bfloat16"),
    "dist.backend": ("auto", "nccl", "gloo"),
    "dist.mode": ("ddp", "dp", "apex"),
    "device": ("auto", "cpu", "cuda"),
}

Test = Callable[[Any], bool]


def _ge(low: float) -> Test:
    return lambda v: v >= low


def _gt(low: float) -> Test:
    return lambda v: v > low


def _null_or(test: Test) -> Test:
    return lambda v: v is None or test(v)


def _each(test: Test) -> Test:
    return lambda v: v is None or all(test(x) for x in v)


# key: (test, what the value must be); the types are already checked (utils/typed_merge.py)
RANGES: Dict[str, Tuple[Test, str]] = {
    "seed": (_ge(0), ">= 0"),
    "threads": (_null_or(_ge(1)), ">= 1 or null"),
    "data.batch_size": (_ge(1), ">= 1"),
    "data.eval_batch_size": (_null_or(_ge(1)), ">= 1 or null"),
    "data.global_batch_size": (_null_or(_ge(1)), ">= 1 or null"),
    "data.num_workers": (_ge(0), ">= 0"),
    "data.prefetch_factor": (_null_or(_ge(1)), ">= 1 or null"),
    "data.prefetch_depth": (_ge(1), ">= 1"),
    "data.std": (_each(_gt(0)), "numbers > 0 (one per channel) or null"),
    "model.input_size": (_each(_ge(1)), "one sample's shape, every size >= 1 (e.g. [3, 224, 224]), or null"),
    "optim.lr": (_ge(0), ">= 0"),  # 0 is a run that only evaluates or only updates statistics
    "optim.weight_decay": (_ge(0), ">= 0"),
    "optim.momentum": (lambda v: 0 <= v < 1, "in [0, 1)"),
    "optim.betas": (lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers in [0, 1) (e.g. [0.9, 0.999])"),
    "optim.layer_decay": (_null_or(lambda v: 0 < v <= 1), "in (0, 1] (e.g. 0.75) or null"),
    "schedule.warmup_epochs": (_ge(0), ">= 0"),
    "schedule.warmup_start_factor": (lambda v: 0 < v <= 1, "in (0, 1]"),
    "schedule.min_lr_factor": (lambda v: 0 <= v <= 1, "in [0, 1]"),
    "schedule.step_epochs": (lambda v: all(x >= 0 for x in v) and list(v) == sorted(v), "ascending epochs >= 0 (e.g. [30, 60])"),
    "schedule.gamma": (_gt(0), "> 0"),
    "schedule.power": (_gt(0), "> 0"),
    "train.epochs": (_ge(1), ">= 1"),
    "train.iterations": (_null_or(_ge(1)), ">= 1 or null"),
    "train.accumulate": (_ge(1), ">= 1"),
    "train.clip_grad_norm": (_null_or(_gt(0)), "> 0 or null"),
    "train.clip_grad_value": (_null_or(_gt(0)), "> 0 or null"),
    "train.log_every": (_ge(1), ">= 1 (log every N steps)"),
    "train.checkpoint_every_steps": (_ge(0), ">= 0 (0: at the end of each epoch only)"),
    "train.keep_checkpoints": (_ge(1), ">= 1"),
    "train.max_nonfinite_skips": (_ge(0), ">= 0"),
    "train.patience": (_null_or(_ge(1)), ">= 1 or null"),
    "train.sync_every": (_null_or(_ge(1)), ">= 1 or null (null: train.log_every)"),
    "eval.every": (_ge(1), ">= 1"),
    "dist.timeout_s": (_ge(1), ">= 1"),
    "dist.bucket_cap_mb": (_gt(0), "> 0"),
}

_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def validate(cfg: "Config") -> None:
    """Every choice and range, then every cross-key reference; ConfigError at the first problem."""
    for key, choices in CHOICES.items():
        value = lookup(cfg, key)
        if value not in choices:
            hint = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.0)
            raise ConfigError(f"config key '{key}' must be one of {list(choices)}, got {value!r}; did you mean '{hint[0]}'?")
    for key, (test, what) in RANGES.items():
        value = lookup(cfg, key)
        if not test(value):
            raise ConfigError(f"config key '{key}' must be {what}, got {value!r}")
    _validate_lists(cfg)
    _validate_references(cfg)


def _validate_lists(cfg: "Config") -> None:
    """Entries of list-valued keys: losses and hooks by name, importable module paths, the loss scale."""
    for i, item in enumerate(cfg.loss):
        if "name" not in item:
            raise ConfigError(f"config key 'loss[{i}]' needs a 'name' (e.g. {{name: cross_entropy, weight: 1.0}})")
        weight = item.get("weight", 1.0)
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or weight < 0:
            raise ConfigError(f"config key 'loss[{i}].weight' must be a number >= 0, got {weight!r}")
    for i, item in enumerate(cfg.hooks):
        if "name" not in item:
            raise ConfigError(f"config key 'hooks[{i}]' needs a 'name' (e.g. {{name: my_hook}}), got {item!r}")
        if not isinstance(item.get("enabled", True), bool):
            raise ConfigError(f"config key 'hooks[{i}].enabled' must be true or false, got {item['enabled']!r}")
    for name in cfg.custom_imports:
        if not isinstance(name, str) or not _MODULE.match(name):
            dotted = re.sub(r"\.py$", "", str(name)).strip("/.").replace("/", ".")
            raise ConfigError(f"custom_imports: {name!r} is not a module path; give the module as you would import it (e.g. {dotted or 'my_package.my_module'}), with its folder on PYTHONPATH")
    if cfg.amp.loss_scale not in ("auto", "dynamic") and (isinstance(cfg.amp.loss_scale, str) or not cfg.amp.loss_scale > 0):
        raise ConfigError(f"config key 'amp.loss_scale' must be auto, dynamic or a number > 0, got {cfg.amp.loss_scale!r}")


def _validate_references(cfg: "Config") -> None:
    """Keys that must agree with each other."""
    data, ema = cfg.data, cfg.train.ema
    if (data.mean is None) != (data.std is None) or (data.mean is not None and len(data.mean) != len(data.std)):
        raise ConfigError(f"config keys 'data.mean' and 'data.std' go together, one number per channel each; got {data.mean!r} and {data.std!r}")
    channels = cfg.model.input_size[0] if cfg.model.input_size else None
    if data.mean is not None and channels is not None and len(data.mean) != channels:
        raise ConfigError(f"config key 'data.mean' has {len(data.mean)} value(s) but model.input_size={cfg.model.input_size} has {channels} channel(s); give one mean and std per channel")
    if data.prefetch == "cuda" and cfg.device == "cpu":
        raise ConfigError("config key 'data.prefetch' is cuda but device=cpu; use data.prefetch=thread or auto")
    if ema is not None:
        unknown = sorted(set(ema) - {"decay", "warmup"})
        decay = ema.get("decay", 0.5)  # only a given decay is checked; a missing one takes ModelEma's default
        if unknown or not isinstance(decay, (int, float)) or not 0.0 < decay < 1.0 or not isinstance(ema.get("warmup", True), bool):
            raise ConfigError(f"config key 'train.ema' must look like {{decay: 0.9998, warmup: true}} with 0 < decay < 1, got {ema!r}")
    if data.global_batch_size is not None and data.loader == "dali":
        raise ConfigError("config key 'data.global_batch_size' needs data.loader=torch (DALI's readers shard and shuffle the data themselves); set data.loader=torch or data.global_batch_size=null")
    if data.global_batch_size is not None and cfg.optim.lr_scaling != "none":
        raise ConfigError(
            f"config key 'optim.lr_scaling' is {cfg.optim.lr_scaling}, which scales the LR with the world size, but data.global_batch_size "
            "keeps the global batch the same at every world size; set optim.lr_scaling=none and give optim.lr for the global batch"
        )
    if cfg.eval.use_ema and ema is None:
        raise ConfigError("config key 'eval.use_ema' is true but train.ema is not set; set train.ema={decay: 0.9998} or eval.use_ema=false")
    _validate_compile(cfg.train.compile)
    profile = cfg.train.profile
    if profile is not None:
        bad = sorted(set(profile) - {"wait", "warmup", "active"}) or [k for k, v in profile.items() if not isinstance(v, int) or isinstance(v, bool) or v < (1 if k == "active" else 0)]
        if bad or "active" not in profile:
            raise ConfigError(f"config key 'train.profile' must look like {{wait: 1, warmup: 1, active: 5}} (wait, warmup >= 0, active >= 1), got {profile!r}")


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")
COMPILE_DEFAULTS: Dict[str, Any] = {"mode": "default", "backend": "inductor", "fullgraph": False, "dynamic": None}


def _validate_compile(spec: Any) -> None:
    options = {**COMPILE_DEFAULTS, **spec} if isinstance(spec, dict) else COMPILE_DEFAULTS
    unknown = sorted(set(options) - set(COMPILE_DEFAULTS))
    if unknown or options["mode"] not in COMPILE_MODES or not isinstance(options["backend"], str) or not isinstance(options["fullgraph"], bool) or options["dynamic"] not in (None, True, False):
        example = "{mode: default, backend: inductor, fullgraph: false, dynamic: null}"
        raise ConfigError(f"config key 'train.compile' must be true, false/null or a mapping like {example} with mode one of {list(COMPILE_MODES)}, got {spec!r}")


def compile_options(spec: Any) -> Optional[Dict[str, Any]]:
    """The ``torch.compile`` arguments of ``train.compile``, or None when it is off."""
    if spec is None or spec is False:
        return None
    return {**COMPILE_DEFAULTS, **(spec if isinstance(spec, dict) else {})}
