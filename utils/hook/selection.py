"""Which registered hooks a run gets: the defaults of its task, switched and set by the ``hooks:`` list.

A hook class declares the tasks (``eval.metric`` values) it serves in ``tasks``; ``("*",)``
serves every task. Every such hook of the run's task is built with its default
arguments, unless a ``hooks:`` entry names it: then the entry's arguments are used,
and ``enabled: false`` leaves it out. Entries that name no default hook add a hook.
(The built-in behaviours are not hooks: checkpoints, validation, logs, EMA and the
stop signal are set up by their own config keys, ``utils/engine/``.)
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from utils.errors import ConfigError
from utils.registry import HOOKS


def serves(hook_class: Any, task: str) -> bool:
    """Whether ``hook_class`` runs by default for ``task``."""
    tasks = getattr(hook_class, "tasks", ()) or ()
    return "*" in tasks or task in tasks


def default_hook_names(task: str) -> List[str]:
    """The registered hooks that run by default for ``task``, by name."""
    return [name for name in HOOKS.names() if serves(HOOKS.get(name), task)]


def _parse(spec: Dict[str, Any]) -> Tuple[str, bool, Dict[str, Any]]:
    args = dict(spec)
    name = HOOKS.resolve(args.pop("name"))
    enabled = args.pop("enabled", True)  # a bool: checked with the config (utils/config/rules.py)
    return name, enabled, args


def check_hook_entries(specs: Sequence[Dict[str, Any]]) -> None:
    """ConfigError for a hook named by two ``hooks:`` entries (by its name or its class name): one of
    them would be ignored or the hook run twice; each hook takes all its settings in one entry."""
    seen: Dict[str, int] = {}
    for index, spec in enumerate(specs):
        name = HOOKS.resolve(spec["name"])
        if name in seen:
            raise ConfigError(
                f"config key 'hooks' names hook '{name}' twice (hooks[{seen[name]}] and hooks[{index}]); "
                "give each hook once, with all its settings in one entry"
            )
        seen[name] = index


def check_hook_tasks(specs: Sequence[Dict[str, Any]], task: str) -> None:
    """ConfigError for a ``hooks:`` entry that turns on a hook whose ``tasks`` leave out ``task`` (``eval.metric``):
    it reads what that task's batches do not hold (a saliency grid, masks). A hook without ``tasks`` (most of the
    users' own) runs in any task; ``enabled: false`` turns nothing on."""
    for index, spec in enumerate(specs):
        name, enabled, _ = _parse(spec)
        hook_class = HOOKS.get(name)
        tasks = tuple(getattr(hook_class, "tasks", ()) or ())
        if tasks and not serves(hook_class, task) and enabled is not False:
            raise ConfigError(
                f"config key 'hooks[{index}]' turns on hook '{name}', which serves eval.metric {', '.join(tasks)}, "
                f"but this run's eval.metric is {task}; remove the entry (or set enabled: false)"
            )


def task_hooks(task: str, specs: Sequence[Dict[str, Any]]) -> List[Any]:
    """The default hooks of ``task`` as the ``hooks:`` entries set them, then the entries' other hooks, built."""
    check_hook_entries(specs)
    check_hook_tasks(specs, task)
    defaults = default_hook_names(task)
    settings: Dict[str, Tuple[bool, Dict[str, Any]]] = {}
    added: List[Tuple[str, Dict[str, Any]]] = []
    for spec in specs:
        name, enabled, args = _parse(spec)
        if name in defaults:
            settings[name] = (enabled, args)
        elif enabled:
            added.append((name, args))
    chosen = [(name, settings.get(name, (True, {}))) for name in defaults]
    return [HOOKS.build(name, **args) for name, (enabled, args) in chosen if enabled] + [
        HOOKS.build(name, **args) for name, args in added
    ]
