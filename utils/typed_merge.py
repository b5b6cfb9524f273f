"""Write nested mappings into dataclass configs, checking every key and type.

Used by ``utils/config.py``; kept apart so the schema (the dataclasses) reads on
its own. An unknown key or a wrong type is a ``ConfigError`` that names the key
and the closest valid one.
"""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any, Dict, List, Mapping, Union

import yaml

from utils.errors import ConfigError


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin is Union:
        return any(_type_ok(value, arg) for arg in typing.get_args(tp))
    if tp is type(None):
        return value is None
    if origin in (list, List):
        (item,) = typing.get_args(tp) or (Any,)
        return isinstance(value, (list, tuple)) and all(_type_ok(v, item) for v in value)
    if origin in (dict, Dict):
        return isinstance(value, dict)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, tp)


def _coerce(value: Any, tp: Any) -> Any:
    if tp is float or (typing.get_origin(tp) is Union and float in typing.get_args(tp)):
        if isinstance(value, int) and not isinstance(value, bool):
            return float(value)
    if typing.get_origin(tp) in (list, List) and isinstance(value, tuple):
        return list(value)
    return value


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _deep_update(target: Dict[str, Any], updates: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(target)
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_update(out[key], value)
        else:
            out[key] = value
    return out


def merge_into(section: Any, updates: Dict[str, Any], prefix: str) -> None:
    """Write ``updates`` into the dataclass ``section``, checking keys and types.

    A mapping given for a dict field (``model.args``) replaces it whole.
    """
    hints = typing.get_type_hints(type(section))
    for key, value in updates.items():
        path = f"{prefix}{key}"
        if key not in hints:
            hint = difflib.get_close_matches(key, list(hints), n=1, cutoff=0.4)
            fix = f"; did you mean '{prefix}{hint[0]}'?" if hint else f"; valid keys: {', '.join(hints)}"
            raise ConfigError(f"unknown config key '{path}'{fix}")
        tp = hints[key]
        current = getattr(section, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"config key '{path}' is a section; give a mapping of its keys, got {value!r}")
            merge_into(current, value, path + ".")
            continue
        if not _type_ok(value, tp):
            raise ConfigError(f"config key '{path}' must be {_type_name(tp)}, got {value!r} ({type(value).__name__})")
        setattr(section, key, _coerce(value, tp))


def _nest(dotted: str, value: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    node = out
    parts = dotted.split(".")
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value
    return out


def apply_override(cfg: Any, dotted: str, value: Any) -> None:
    """Set ``a.b.c = value``; a path that goes into a dict field (``model.args.num_classes``)
    changes that one key and keeps the others."""
    parts = dotted.split(".")
    node: Any = cfg
    for i, part in enumerate(parts):
        prefix = ".".join(parts[:i]) + "." if i else ""
        current = getattr(node, part, None) if part in typing.get_type_hints(type(node)) else None
        rest = parts[i + 1 :]
        if rest and isinstance(current, dict):
            value, rest = _deep_update(current, _nest(".".join(rest), value)), []
        if not rest or not dataclasses.is_dataclass(current):
            merge_into(node, _nest(".".join([part, *rest]), value), prefix)
            return
        node = current


_REQUIRED = object()


def lookup(node: Any, dotted: str, default: Any = _REQUIRED) -> Any:
    """The value at ``a.b.c`` in nested dataclasses and dicts; ``default`` where a part is
    missing (without one, a KeyError naming the path)."""
    for part in dotted.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif dataclasses.is_dataclass(node) and part in typing.get_type_hints(type(node)):
            node = getattr(node, part)
        elif default is not _REQUIRED:
            return default
        else:
            raise KeyError(dotted)
    return node


def parse_value(text: str) -> Any:
    """Parse an override's value as YAML (``3`` -> int, ``[1,2]`` -> list, ``null`` -> None)."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text
