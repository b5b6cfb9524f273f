"""Whether a loaded config is a tree of bounded size, checked before anything walks it.

A YAML file (``&a [*a]``) or a pickle (``x = [x, x]`` forty times, 90 KB) can hand back a
structure that refers to itself or shares one container so often that it expands to 2^40
values: every walker of the config (type checks, merges, copies) then recurses forever or
never ends. Sharing itself is fine (YAML anchors and ``<<: *base`` merge keys share by
reference): the check counts a shared container each time it is reached, so what it bounds
is the size of the config written out. It never recurses and stops at the first problem,
so it takes at most ``MAX_NODES`` steps. ``plain_document`` checks a YAML document (files,
overrides: ``utils/config/yaml_load.py``) and returns it written out (no container shared, so
an override of one place never changes another); ``utils/checkpoint/structure.py`` checks
a checkpoint's entries. Standard library only.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

from utils.errors import ConfigError

MAX_NODES = 1_000_000  # values in all, written out (a class list of ImageNet-21k is 21,841): far beyond any real config
MAX_DEPTH = 100  # nesting levels (a config nests about 6 deep)
CONTAINERS = (dict, list, tuple, set, frozenset)
_LEAVE = object()  # marks the end of a container's children on the walk's stack


def _children(value: Any, path: str) -> List[Tuple[Any, str]]:
    if isinstance(value, dict):
        return [(item, f"{path}.{key}" if path else str(key)) for key, item in value.items()]
    return [(item, f"{path}[{i}]") for i, item in enumerate(value)]


def _shown(path: str) -> str:
    """``path`` for a message: a deep one keeps its start and its end."""
    return (path if len(path) <= 60 else f"{path[:40]}...{path[-16:]}") if path else "the top level"


def tree_problem(value: Any, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> Optional[str]:
    """None when ``value`` is a tree of bounded size: no container inside itself (a cycle), at most ``max_nodes``
    values written out (a shared container counts each time it is reached), at most ``max_depth`` levels; else what it
    is instead, naming the place (``data.args.classes[0]``)."""
    open_at: Dict[int, str] = {}  # the containers on the way from the top to the current one -> where each was reached
    pending: List[Tuple[Any, str, int]] = [(value, "", 0)]
    nodes = 1
    while pending:
        item, path, depth = pending.pop()
        if item is _LEAVE:  # all of a container's children walked: it is no longer on the way (``depth`` holds its id)
            del open_at[depth]
            continue
        # an empty one expands to nothing (and () is one shared object)
        if not isinstance(item, CONTAINERS) or not item:
            continue
        if id(item) in open_at:
            return f"contains itself at '{_shown(path)}' (a cycle: it refers to '{_shown(open_at[id(item)])}', which holds it)"
        if depth >= max_depth:
            return f"is nested more than {max_depth} levels deep at '{_shown(path)}'"
        nodes += len(item)  # counted before they are listed: a huge list is refused without listing it
        if nodes > max_nodes:
            return f"holds more than {max_nodes:,} values written out (containers shared by reference count each time)"
        open_at[id(item)] = path
        pending.append((_LEAVE, path, id(item)))
        pending.extend((child, at, depth + 1) for child, at in reversed(_children(item, path)))
    return None


def written_out(value: Any) -> Any:
    """``value`` with every dict and list copied, so no two places share one (call on a checked tree only)."""
    if isinstance(value, dict):
        return {key: written_out(item) for key, item in value.items()}
    if isinstance(value, list):
        return [written_out(item) for item in value]
    return value


def plain_document(load: Callable[[], Any]) -> Any:
    """The document ``load()`` parses (``yaml.load``), written out; ConfigError when it nests too deeply to parse, refers
    to itself or is too large written out."""
    try:
        data = load()
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ConfigError(
            f"the YAML nests collections too deeply to read (a config nests a few levels, at most {MAX_DEPTH}); write it flat"
        ) from None
    problem = tree_problem(data)
    if problem is not None:
        raise ConfigError(
            f"the YAML {problem}; a config is a tree: write the values out (anchors and aliases, &name and *name, may share a value "
            "but never hold themselves)"
        )
    return written_out(data)
