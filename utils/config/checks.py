"""The checks of a whole config once it is merged, before any data is read: every field's rule
(``utils/config/rules.py``), the entries of list-valued keys, then the keys that must agree with each other.
``load_config`` (``utils/config/load.py``) runs them; builders trust the validated config. Names that the
registries resolve (networks, datasets, metrics and the names a metric reports) are checked right after, by
``utils/references.py``.
"""

from __future__ import annotations

import math
import re

from utils.config.rules import check_compile, check_rules, ema_settings
from utils.config.schema import Config
from utils.errors import ConfigError

_MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def validate(cfg: Config) -> None:
    """Every field's rule, then every cross-key reference; ConfigError at the first problem."""
    check_rules(cfg)
    _validate_lists(cfg)
    _validate_references(cfg)


def _validate_lists(cfg: Config) -> None:
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


def _validate_references(cfg: Config) -> None:
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
            "config key 'data.global_batch_size' needs data.loader=torch (the loader its exactness over world sizes is checked with); set data.loader=torch or data.global_batch_size=null"
        )
    if cfg.train.record_samples and data.loader == "dali":
        raise ConfigError(
            "config key 'train.record_samples' needs data.loader=torch (the loader whose batches it is checked to record); set data.loader=torch or train.record_samples=false"
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
    check_compile(cfg.train.compile)
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
