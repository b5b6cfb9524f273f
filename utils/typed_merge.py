"""Write nested mappings into dataclass configs, checking every key and type.

Used by ``utils/config.py``; kept apart so the schema (the dataclasses) reads on
its own. An unknown key or a wrong type is a ``ConfigError`` that names the key
and the closest valid one.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import typing
from typing import Any, Dict, List, Literal, Mapping, Union

import yaml

from utils.errors import ConfigError

# A number in exponent form: YAML 1.1 (PyYAML) reads 1e-3 and 5E+2 as strings, it wants 1.0e-3.
_EXPONENT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)?(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, with numbers in exponent form (``1e-3``, ``5E+2``) read as floats, as YAML 1.2 does."""


_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _EXPONENT, list("-+0123456789."))


def _mapping_without_duplicates(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Dict[Any, Any]:
    """A mapping whose keys are unique: YAML would keep the last of two equal keys without a word
    (a second ``optim:`` block silently replacing the first)."""
    lines: Dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in lines:
            raise ConfigError(f"key '{key}' appears twice in one mapping (lines {lines[key]} and {line}); YAML would keep only the second: merge them into one")
        lines[key] = line
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)

# ``{num_classes:10}``: without a space after the colon, YAML reads one key "num_classes:10" with no value
_GLUED = re.compile(r"^[A-Za-z_][\w.]*:[^\s:]")


def _glued_keys(value: Any) -> List[str]:
    """Keys of ``value``'s mappings (at any depth) that are ``key:value`` written without the space YAML needs."""
    if isinstance(value, dict):
        glued = [k for k, v in value.items() if isinstance(k, str) and v is None and _GLUED.match(k)]
        return glued + [k for v in value.values() for k in _glued_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in _glued_keys(v)]
    return []


def load_yaml(text: str) -> Any:
    """Parse YAML as users type it: ``lr: 1e-3`` is the float 0.001, everywhere (config files, overrides,
    plugin arguments). A key given twice in a mapping, and ``{key:value}`` without the space after the
    colon, are ConfigErrors that say so."""
    data = yaml.load(text, Loader=_Loader)
    glued = _glued_keys(data)
    if glued:
        fixed = re.sub(r"(?<=[\w\]}'\"]):(?=[^\s/])", ": ", text.strip())
        raise ConfigError(f"'{glued[0]}' reads as one key without a value: YAML needs a space after ':' in a mapping; write {fixed}")
    return data


def _as_number(value: Any) -> Any:
    """A string in exponent form (from a mapping not parsed by ``load_yaml``) as a float; anything else unchanged."""
    return float(value) if isinstance(value, str) and _EXPONENT.match(value.strip()) else value


def _type_ok(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if tp is Any:
        return True
    if origin is Literal:
        return any(value == choice and type(value) is type(choice) for choice in typing.get_args(tp))
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
    """Ints where floats are expected become floats, exponent-form strings numbers, tuples lists
    (also inside lists and optional values); what does not fit is left for the type check."""
    origin = typing.get_origin(tp)
    if origin is Union:
        for arg in typing.get_args(tp):
            if arg is not type(None) and arg is not str:
                coerced = _coerce(value, arg)
                if _type_ok(coerced, arg):
                    return coerced
        return value
    if tp is float:
        value = _as_number(value)
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if origin in (list, List) and isinstance(value, (list, tuple)):
        (item,) = typing.get_args(tp) or (Any,)
        return [_coerce(v, item) for v in value]
    return value


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return f"one of {list(typing.get_args(tp))}"
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _type_error(path: str, value: Any, tp: Any) -> ConfigError:
    """What a wrong value must be instead; for a choice, also the closest one."""
    options = typing.get_args(tp) if typing.get_origin(tp) is Union else (tp,)
    literal = next((arg for arg in options if typing.get_origin(arg) is Literal), None)
    if literal is not None:
        choices = [str(c) for c in typing.get_args(literal)]
        hint = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.0)
        null = " or null" if type(None) in options else ""
        return ConfigError(f"config key '{path}' must be {_type_name(literal)}{null}, got {value!r}; did you mean '{hint[0]}'?")
    return ConfigError(f"config key '{path}' must be {_type_name(tp)}, got {value!r} ({type(value).__name__})")


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
        value = _coerce(value, tp)
        if not _type_ok(value, tp):
            raise _type_error(path, value, tp)
        setattr(section, key, value)


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
    """Parse an override's value as YAML (``3`` -> int, ``1e-3`` -> float, ``[1,2]`` -> list, ``null`` -> None).

    Text YAML cannot read stays a string (a path with ``: `` in it)."""
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return text
