"""What a resumed run does with each config key that changed: the rule beside each key of the schema.

Every field of ``utils/config/schema.py`` carries one of three rules in its metadata::

    MATCH   it fixes the network's parameters or the data each step sees: a change is refused
            (``old -> new``, with the way out); ``--resume-force`` accepts a changed model or data
    APPLY   it takes effect from the resumed step: the restored optimizer, schedule and best
            tracker are given the new value, and the change is logged as
            ``changed on resume: optim.lr 0.003 -> 0.0005``
    INERT   it does not touch training (paths, logging, speed and memory knobs); logged as such

A key inside a mapping field (``model.args.num_classes``) follows its field's rule. This module
imports only the standard library: the schema uses it.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Dict, List, Mapping, NamedTuple

MATCH: Dict[str, str] = {"resume": "match"}
APPLY: Dict[str, str] = {"resume": "apply"}
INERT: Dict[str, str] = {"resume": "inert"}
RULES = ("match", "apply", "inert")


class Change(NamedTuple):
    """One config key whose value differs between a checkpoint's run and the resumed one."""

    key: str
    old: Any
    new: Any
    rule: str  # match | apply | inert

    def __str__(self) -> str:
        return f"{self.key} {_shown(self.old)} -> {_shown(self.new)}"


def _shown(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


def field_rules(schema: type, prefix: str = "") -> Dict[str, str]:
    """``{dotted key: rule}`` for every leaf field of the dataclass ``schema`` (sections recursed)."""
    rules: Dict[str, str] = {}
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rules.update(field_rules(tp, f"{prefix}{f.name}."))
        else:
            rules[f"{prefix}{f.name}"] = f.metadata.get("resume", "")
    return rules


def _leaves(value: Any, prefix: str) -> Dict[str, Any]:
    """A nested mapping as ``{dotted key: value}`` (an empty mapping is a leaf; tuples read as lists)."""
    if isinstance(value, Mapping) and value:
        out: Dict[str, Any] = {}
        for key, sub in value.items():
            out.update(_leaves(sub, f"{prefix}.{key}"))
        return out
    return {prefix: list(value) if isinstance(value, tuple) else value}


_ABSENT = object()


def changes(schema: type, saved: Mapping[str, Any], current: Mapping[str, Any]) -> List[Change]:
    """Every leaf that differs between two resolved configs (``dataclasses.asdict`` form), with its
    key's rule. A key the saved config does not hold (written by an older version) is not a change."""
    found: List[Change] = []
    for key, rule in field_rules(schema).items():
        old, new = _lookup(saved, key), _lookup(current, key)
        if old is _ABSENT:
            continue
        olds, news = _leaves(old, key), _leaves(new if new is not _ABSENT else None, key)
        for leaf in sorted(set(olds) | set(news)):
            if olds.get(leaf) != news.get(leaf) and not _emptied(leaf, olds, news):
                found.append(Change(leaf, olds.get(leaf), news.get(leaf), rule))
    return found


def _emptied(leaf: str, olds: Dict[str, Any], news: Dict[str, Any]) -> bool:
    """Whether ``leaf`` is an empty mapping on one side whose keys the other side lists as leaves of their own
    (``data.args: {}`` against ``data.args.val_fraction: 0.2``): those leaves name the change."""
    below = [k for k in (*olds, *news) if k.startswith(leaf + ".")]
    return bool(below) and (olds.get(leaf) == {} or news.get(leaf) == {})


def _lookup(node: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _ABSENT
        node = node[part]
    return node
