"""The structure of a checkpoint's entries, checked once when it is read (``Checkpoint.__init__``).

A file that loads (safely) may still not be what the format says: an entry missing or of another
type would surface later as a bare KeyError or TypeError, or (a ``config`` that is not a mapping)
be silently replaced by the defaults. Each rule here names its entry in one CheckpointError line.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Mapping, Optional, Tuple

import torch

from utils.config.plain_tree import tree_problem
from utils.errors import CheckpointError

PROGRESS_KEYS = ("epoch", "batch", "step")
FORMAT_1_COUNTERS = ("epoch", "batch", "global_step", "ema_updates")

Rule = Callable[[Any], Optional[str]]  # None when the value fits, else what it is instead


def _held(value: Any) -> str:
    name = type(value).__name__
    return "None" if value is None else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _of_type(*types: type) -> Rule:
    return lambda value: None if isinstance(value, types) else _held(value)


def _tensors(value: Any) -> Optional[str]:
    if not isinstance(value, Mapping):
        return _held(value)
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, torch.Tensor):
            return f"a mapping whose {key!r} is {_held(item)}"
    return None


def _ema(value: Any) -> Optional[str]:
    if not isinstance(value, Mapping):
        return _held(value)
    if "weights" not in value:
        return "a mapping without 'weights'"
    problem = _tensors(value["weights"])
    if problem is not None:
        return f"a mapping whose 'weights' is {problem}"
    if not _count(value.get("updates", 0)):
        return f"a mapping whose 'updates' is {value['updates']!r}"
    return None


def _progress(value: Any) -> Optional[str]:
    if not isinstance(value, Mapping):
        return _held(value)
    for key, item in value.items():
        if key not in PROGRESS_KEYS:
            return f"a mapping with the unknown key {key!r}"
        if not _count(item):
            return f"a mapping whose {key!r} is {item!r}"
    return None


def _rng(value: Any) -> Optional[str]:
    if not isinstance(value, (list, tuple)):
        return _held(value)
    bad = next((state for state in value if state is not None and not isinstance(state, Mapping)), None)
    return None if bad is None else f"a list holding {_held(bad)}"


def _plain(*types: type) -> Rule:
    """Of ``types`` and a plain tree (``utils/config/plain_tree.py``): what the config checks and the resume guards walk
    never refers to itself or expands beyond its bounds (a 90 KB pickle can share one list 2^40 times)."""
    return lambda value: (
        _held(value)
        if not isinstance(value, types)
        else (None if (problem := tree_problem(value)) is None else f"{_held(value)} that {problem}")
    )


def _optional(rule: Rule) -> Rule:
    return lambda value: None if value is None else rule(value)


# entry -> (rule, what it must be); None is allowed where older checkpoints may hold it
RULES: Dict[str, Tuple[Rule, str]] = {
    "progress": (_progress, "a mapping {epoch, batch, step} of counts >= 0"),
    "model": (_tensors, "a mapping of parameter names to tensors"),
    "config": (_optional(_plain(Mapping)), "a mapping (the run's resolved config) that is a plain tree"),
    "classes": (_optional(_plain(list, tuple)), "a plain list of class names"),
    "data": (_optional(_plain(Mapping)), "a plain mapping (the training data's identity)"),
    "param_layout": (_optional(_plain(list, tuple)), "a plain list of each optimizer group's parameter names"),
    "world_size": (_optional(lambda v: None if _count(v) and v >= 1 else repr(v)), "a number of processes >= 1"),
    "framework": (_optional(_of_type(str)), "a version string"),
    "ema": (_optional(_ema), "a mapping {weights: tensors, updates: count}"),
    "optimizer": (_optional(_of_type(Mapping)), "a mapping (an optimizer's state_dict)"),
    "scheduler": (_optional(_of_type(Mapping)), "a mapping (a scheduler's state_dict)"),
    "amp": (_optional(_of_type(Mapping)), "a mapping (the amp state)"),
    "rng": (_optional(_rng), "a list of per-rank random states"),
    "loop": (_optional(_of_type(Mapping)), "a mapping of component states by name"),
    "hooks": (_optional(_of_type(Mapping)), "a mapping of hook states by name"),
    "sharded": (_optional(_of_type(bool)), "true or false"),
}


def damaged(source: str, problem: str) -> CheckpointError:
    """The one line for a checkpoint whose structure is wrong."""
    return CheckpointError(
        f"checkpoint '{source}' {problem}; the file is damaged or not a checkpoint of this framework"
    )


def _check_entries(data: Mapping[str, Any], source: str, keys: Iterable[str]) -> None:
    for key in keys:
        if key in data:
            problem = RULES[key][0](data[key])
            if problem is not None:
                raise damaged(source, f"entry '{key}' is {problem}, expected {RULES[key][1]}")


def _check_format_1(data: Mapping[str, Any], source: str) -> None:
    """A framework-0.1 checkpoint (flat keys): its counters, and the entries it shares with later formats."""
    for key in FORMAT_1_COUNTERS:
        if key in data and not _count(data[key]):
            raise damaged(source, f"entry '{key}' is {data[key]!r}, expected a count >= 0")
    for key, rule, expected in (
        ("ema", _tensors, RULES["model"][1]),
        ("best", _of_type(Mapping), "a mapping"),
        ("nonfinite", _of_type(Mapping), "a mapping"),
    ):
        problem = _optional(rule)(data.get(key))
        if problem is not None:
            raise damaged(source, f"entry '{key}' is {problem}, expected {expected}")
    _check_entries(
        data, source, [key for key in RULES if key not in ("progress", "ema", "loop", "hooks", "data", "param_layout")]
    )


def check_structure(data: Mapping[str, Any], source: str, sharded: bool = False) -> None:
    """Every entry of checkpoint ``data`` (format 1, 2 or 3, before it is upgraded) is there when required
    and of its type (``RULES``); ``sharded``: the weights are in the shards, read when asked. An unknown
    format is left to the format check, which names it."""
    if "format" not in data:
        _check_format_1(data, source)
        return
    if not _count(data["format"]):
        raise damaged(source, f"entry 'format' is {_held(data['format'])}, expected a format number")
    if data["format"] not in (2, 3):
        return
    if "progress" not in data:
        raise damaged(source, "has no 'progress' entry (where training continues)")
    _check_entries(data, source, [key for key in RULES if not (key == "model" and sharded)])
    hooks = data.get("hooks") or {}
    # upgraded into the validator's and checkpointer's states
    for name in ("validation", "checkpoint") if data["format"] == 2 else ():
        if name in hooks and not isinstance(hooks[name], Mapping):
            raise damaged(source, f"entry 'hooks.{name}' is {_held(hooks[name])}, expected a mapping")
