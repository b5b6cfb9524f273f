"""What types alone cannot say about a config key: ranges, and the rules of single keys.

Each rule is written once. Choices are ``Literal`` types in the schema
(``utils/config/schema.py``), checked with the types when a value is merged
(``utils/config/typed_merge.py``); ranges are the ``rule``/``at_least``/``above``
metadata beside their fields, which ``check_rules`` checks (one ``ConfigError``
naming the key, what it must be and what it is). The keys that refer to each
other are checked by ``utils/config/checks.py``, when the config is loaded.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import typing
from typing import Any, Callable, Dict, Optional, Tuple

from utils.errors import ConfigError

Test = Callable[[Any], bool]


def rule(test: Test, what: str) -> Dict[str, Any]:
    """Field metadata: ``test(value)`` must hold, else ``config key '<key>' must be <what>``.

    Ranges live beside their fields in ``utils/config/schema.py``; choices are ``Literal`` types there,
    checked with the types (``utils/config/typed_merge.py``).
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


def takes_floats(tp: Any) -> bool:
    """Whether the type ``tp`` holds floats (``float``, ``Optional[float]``, ``List[float]``, ...)."""
    return tp is float or any(takes_floats(arg) for arg in typing.get_args(tp))


def not_finite(value: Any) -> bool:
    """A float that is inf or NaN, also inside a list (``data.mean: [.nan]``)."""
    if isinstance(value, (list, tuple)):
        return any(not_finite(v) for v in value)
    return isinstance(value, float) and not math.isfinite(value)


def check_rules(section: Any, prefix: str = "") -> None:
    """Every field's rule in ``section`` and its subsections (keys named ``<prefix><field>``), and finite floats."""
    hints = typing.get_type_hints(type(section))
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            check_rules(value, f"{prefix}{f.name}.")
            continue
        # every float key, whatever its range: inf and NaN pass ``>=`` tests or poison the run silently
        if takes_floats(hints[f.name]) and not_finite(value):
            what = "hold finite numbers only" if isinstance(value, (list, tuple)) else "be a finite number"
            raise ConfigError(f"config key '{prefix}{f.name}' must {what}, got {value!r}")
        if "rule" in f.metadata:
            test, what = f.metadata["rule"]
            if not test(value):
                raise ConfigError(f"config key '{prefix}{f.name}' must be {what}, got {value!r}")


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


def check_compile(spec: Any) -> None:
    """ConfigError unless ``train.compile`` is true, false/null or a mapping of ``COMPILE_DEFAULTS``' options."""
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
