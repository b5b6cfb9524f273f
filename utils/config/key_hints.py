"""The key an unknown config key meant, looked for in the whole key tree: a key of another section (or of the top
level) given under the wrong one (``train.threads`` for the top-level ``threads``) is named by its full path before
a similar key of the section given (``train.iterations``, a near miss of the letters only)."""

from __future__ import annotations

import dataclasses
import difflib
import typing
from typing import Any, Iterator, List

LOCAL_CUTOFF = 0.4  # how alike a key of the section given must be (difflib's ratio)
ELSEWHERE_CUTOFF = 0.75  # a key of another section: a typo of a key given in the wrong place, no more


def key_paths(node: Any, prefix: str = "") -> Iterator[str]:
    """The full dotted path of every key of the dataclass config ``node``, sections included (``train``,
    ``train.epochs``); the keys inside a mapping value (``model.args``) are the user's own, not listed."""
    for key in typing.get_type_hints(type(node)):
        yield prefix + key
        value = getattr(node, key, None)
        if dataclasses.is_dataclass(value):
            yield from key_paths(value, f"{prefix}{key}.")


def _section(path: str) -> str:
    return path.rpartition(".")[0]


def _leaf(path: str) -> str:
    return path.rpartition(".")[2]


def _below(value: Any) -> str:
    """The keys a value given for a section names, while it names one key per level: ``{opt_level: O1}`` -> ``.opt_level``."""
    tail = ""
    while isinstance(value, dict) and len(value) == 1:
        key, value = next(iter(value.items()))
        tail += f".{key}"
    return tail


def meant(root: Any, path: str) -> List[str]:
    """The full paths of the keys the unknown key ``path`` most likely meant (none: nothing is alike): the same key
    in other sections or at the top level first, else the most alike key, where one of the section given wins a
    tie and one of another section must be close (``ELSEWHERE_CUTOFF``)."""
    section, key = _section(path), _leaf(path)
    paths = [found for found in key_paths(root) if found != path]
    same = [found for found in paths if _leaf(found) == key]
    if same:
        return same
    best, score = None, 0.0
    for found in paths:
        local = _section(found) == section
        ratio = difflib.SequenceMatcher(None, key, _leaf(found)).ratio()
        if ratio >= (LOCAL_CUTOFF if local else ELSEWHERE_CUTOFF) and (ratio, local) > (score, False):
            best, score = found, ratio
    return [] if best is None else [best]


def did_you_mean(root: Any, path: str, value: Any = None) -> str:
    """``; did you mean 'X'?`` for the unknown key ``path`` given ``value``, saying where X lives when that is
    another section; '' when no key is alike."""
    found = meant(root, path)
    if not found:
        return ""
    moved = [p for p in found if _section(p) != _section(path)]
    if not moved:  # a misspelt key: the name to change it to
        return " or ".join(f"'{p}'" for p in found).join(("; did you mean ", "?"))
    text = " or ".join(f"'{p}{_below(value)}'" for p in found)  # a key in the wrong place: where it all goes
    homes = [f"'{_section(p)}'" if _section(p) else "the top level" for p in moved]
    places = homes[0] if len(homes) == 1 else ", ".join(homes[:-1]) + " and " + homes[-1]
    given = f"'{_section(path)}'" if _section(path) else "the top level"
    return f"; did you mean {text}? ('{_leaf(moved[0])}' is a key of {places}, not of {given})"
