"""Write nested mappings into dataclass configs, checking every key and type.

Used by ``utils/config/load.py``; kept apart so the schema (the dataclasses of
``utils/config/schema.py``) reads on its own. An unknown key or a wrong type is a ``ConfigError`` that names the key
and the closest valid one. The YAML itself (files, override values) is read by
``utils/config/yaml_load.py``.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import types
import typing
from typing import Annotated, Any, Dict, List, Literal, Mapping, Tuple, Union

import yaml

from utils.config.key_hints import did_you_mean
from utils.config.rules import MAPPING_EXAMPLES
from utils.config.yaml_load import EXPONENT, load_yaml
from utils.errors import ConfigError


def _as_number(value: Any) -> Any:
    """A string in exponent form (from a mapping not parsed by ``load_yaml``) as a float; anything else unchanged."""
    return float(value) if isinstance(value, str) and EXPONENT.match(value.strip()) else value


def _checks(tp: Any) -> List[Any]:
    """The range markers of ``Annotated[T, ...]``: callables with a ``what`` (``utils/config/arguments.py``)."""
    return [m for m in getattr(tp, "__metadata__", ()) if callable(m) and hasattr(m, "what")]


_LISTS = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _is_union(origin: Any) -> bool:
    return origin is Union or origin is getattr(types, "UnionType", Union)  # ``int | None`` from Python 3.10


def type_ok(value: Any, tp: Any) -> bool:
    """Whether ``value`` (as YAML gives it) is a ``tp``: int, float, bool, str, None, Any, Literal,
    Union/Optional, List/Sequence/Tuple and Dict/Mapping of them, and ``Annotated`` with range
    markers. A type outside this vocabulary (a class, a Callable) is not checked."""
    origin = typing.get_origin(tp)
    if tp is Any or isinstance(tp, typing.TypeVar):
        return True
    if origin is Annotated:
        return type_ok(value, typing.get_args(tp)[0]) and all(check(value) for check in _checks(tp))
    if origin is Literal:
        return any(value == choice and type(value) is type(choice) for choice in typing.get_args(tp))
    if _is_union(origin):
        return any(type_ok(value, arg) for arg in typing.get_args(tp))
    if tp is type(None) or tp is None:
        return value is None
    if origin in _LISTS or tp in (list, tuple):
        items = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            return False
        if origin is tuple and items and items[-1] is not Ellipsis:  # Tuple[int, int]: that many entries
            return len(items) == len(value) and all(type_ok(v, t) for v, t in zip(value, items))
        return all(type_ok(v, items[0]) for v in value) if items else True
    if origin in _MAPPINGS or tp in (dict,):
        return isinstance(value, dict)
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp in (bool, str):
        return isinstance(value, tp)
    return True


_WORDS = {
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "true/false values"),
    str: ("a string", "strings"),
    type(None): ("null", "nulls"),
    dict: ("a mapping", "mappings"),
}


def _join(words: List[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def type_name(tp: Any, example: str = "", plural: bool = False) -> str:
    """What ``tp`` takes, in words: ``Optional[Dict[str, Any]]`` -> 'a mapping or null' (with
    ``example``: 'a mapping (e.g. {decay: 0.9998}) or null'), ``List[float]`` -> 'a list of numbers',
    ``Union[bool, Dict, None]`` -> 'true/false, a mapping or null', ``Annotated[int, at_least(1)]``
    -> 'an integer >= 1'."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Annotated:
        return f"{type_name(args[0], example, plural)} {' and '.join(c.what for c in _checks(tp))}".rstrip()
    if origin is Literal:
        return f"{'values from' if plural else 'one of'} {list(args)}"
    if _is_union(origin):
        words = [("true/false" if arg is bool and len(args) > 1 else type_name(arg, example, plural)) for arg in args]
        return _join(words)
    if origin in _LISTS or tp in (list, tuple):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return f"{'lists' if plural else 'a list'} of {len(args)} {_join([type_name(a, plural=True) for a in dict.fromkeys(args)])}"
        item = f" of {type_name(args[0], plural=True)}" if args and args[0] is not Any else ""
        return ("lists" if plural else "a list") + item
    if origin in _MAPPINGS or tp is dict:
        tp = dict
    if tp is Any:
        return "values" if plural else "any value"
    words = _WORDS.get(tp, (f"a {getattr(tp, '__name__', tp)}", f"{getattr(tp, '__name__', tp)} values"))[
        1 if plural else 0
    ]
    return f"{words} (e.g. {example})" if example and tp is dict else words


def _coerce(value: Any, tp: Any) -> Any:
    """Ints where floats are expected become floats, exponent-form strings numbers, tuples lists
    (also inside lists and optional values); what does not fit is left for the type check."""
    origin = typing.get_origin(tp)
    if origin is Union:
        for arg in typing.get_args(tp):
            if arg is not type(None) and arg is not str:
                coerced = _coerce(value, arg)
                if type_ok(coerced, arg):
                    return coerced
        return value
    if tp is float:
        value = _as_number(value)
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if origin in (list, List) and isinstance(value, (list, tuple)):
        (item,) = typing.get_args(tp) or (Any,)
        return [_coerce(v, item) for v in value]
    return value


def _type_error(path: str, value: Any, tp: Any) -> ConfigError:
    """What a wrong value must be instead; for a choice, also the closest one."""
    options = typing.get_args(tp) if typing.get_origin(tp) is Union else (tp,)
    literal = next((arg for arg in options if typing.get_origin(arg) is Literal), None)
    if literal is not None:
        choices = [str(c) for c in typing.get_args(literal)]
        hint = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.0)
        null = " or null" if type(None) in options else ""
        return ConfigError(
            f"config key '{path}' must be {type_name(literal)}{null}, got {value!r}; did you mean '{hint[0]}'?"
        )
    return ConfigError(
        f"config key '{path}' must be {type_name(tp, MAPPING_EXAMPLES.get(path, ''))}, got {value!r} ({type(value).__name__})"
    )


def _deep_update(target: Dict[str, Any], updates: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(target)
    for key, value in updates.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_update(out[key], value)
        else:
            out[key] = value
    return out


def merge_into(section: Any, updates: Dict[str, Any], prefix: str, root: Any = None) -> None:
    """Write ``updates`` into the dataclass ``section`` (at ``prefix`` in the config ``root``), checking keys and
    types; an unknown key is named with the key of the whole tree it most likely meant (``utils/config/key_hints.py``).

    A mapping given for a dict field (``model.args``) replaces it whole.
    """
    root = section if root is None else root
    hints = typing.get_type_hints(type(section))
    for key, value in updates.items():
        path = f"{prefix}{key}"
        if key not in hints:
            fix = did_you_mean(root, path, value) or f"; valid keys: {', '.join(hints)}"
            raise ConfigError(f"unknown config key '{path}'{fix}")
        tp = hints[key]
        current = getattr(section, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"config key '{path}' is a section; give a mapping of its keys, got {value!r}")
            merge_into(current, value, path + ".", root)
            continue
        value = _coerce(value, tp)
        if not type_ok(value, tp):
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
            merge_into(node, _nest(".".join([part, *rest]), value), prefix, cfg)
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


def flatten(tree: Dict[str, Any], prefix: str = "") -> Dict[str, Any]:
    """``{"optim": {"lr": 0.1}}`` -> ``{"optim.lr": 0.1}``; lists and scalars are values."""
    flat: Dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def parse_value(text: str) -> Any:
    """Parse an override's value as YAML (``3`` -> int, ``1e-3`` -> float, ``[1,2]`` -> list, ``null`` -> None).

    Text YAML cannot read stays a string (a path with ``: `` in it)."""
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return text


def parse_override(item: str) -> Tuple[str, Any]:
    """The key and the value of the override ``key.sub=value`` (the value parsed by ``parse_value``); ConfigError
    for an item without ``=`` or a value YAML refuses (a key twice, a mapping without spaces)."""
    if "=" not in item:
        raise ConfigError(f"override '{item}' must look like key.sub=value")
    key, text = item.split("=", 1)
    try:
        value = parse_value(text)
    except ConfigError as err:
        raise ConfigError(f"override '{item}': {err}") from None
    return key.strip(), value
