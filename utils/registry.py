"""Named registries that let the config select classes by name.

A registry knows the package that holds its members (``location``) and imports
every file of that package the first time it is asked for a name, so a user who
drops ``network/my_net.py`` with ``@NETWORKS.register()`` can select it in the
config without editing any other file.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
import re
from types import ModuleType
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from utils.errors import ConfigError, RegistryError


def import_submodules(package: str) -> List[ModuleType]:
    """Import ``package`` and every module below it (recursively)."""
    root = importlib.import_module(package)
    modules = [root]
    for info in pkgutil.walk_packages(getattr(root, "__path__", []), prefix=package + "."):
        modules.append(importlib.import_module(info.name))
    return modules


def closest(name: str, candidates: List[str]) -> Optional[str]:
    """The candidate most similar to ``name``, or None when nothing is close."""
    matches = difflib.get_close_matches(name, candidates, n=1, cutoff=0.5)
    return matches[0] if matches else None


def snake_case(name: str) -> str:
    """``SmallCNN`` -> ``small_cnn``, ``MyNet`` -> ``my_net``, ``cross_entropy`` unchanged."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _where(obj: Any) -> str:
    try:
        return f"{inspect.getsourcefile(obj)}:{inspect.getsourcelines(obj)[1]}"
    except (TypeError, OSError):
        return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', obj)}"


class UnknownArguments(ConfigError):
    """Arguments a registered class or function does not take (the caller may name the config key's fix)."""


def _check_arguments(what: str, obj: Any, kwargs: Dict[str, Any]) -> None:
    """ConfigError when ``obj(**kwargs)`` cannot bind: unknown or missing arguments."""
    try:
        signature = inspect.signature(obj)
    except (TypeError, ValueError):  # some builtins have no signature: let the call decide
        return
    try:
        signature.bind(**kwargs)
    except TypeError as err:
        params = signature.parameters
        takes = (
            ", ".join(n for n, p in params.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)) or "no arguments"
        )
        unknown = [k for k in kwargs if k not in params]
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            raise UnknownArguments(f"{what} got unknown argument(s) {unknown}; it takes: {takes}") from None
        raise ConfigError(f"{what}: {err}; it takes: {takes}") from None


class Registry:
    """A name -> class (or function) table with a decorator to fill it.

    ``location`` names the package (or packages) whose files register the
    members; they are imported on the first lookup. A member is found by its
    registered name or by its class name (``my_net`` or ``MyNet``).
    """

    def __init__(self, name: str, location: Union[str, Sequence[str], None] = None, usage: str = "") -> None:
        self.name = name
        self.locations: Tuple[str, ...] = (location,) if isinstance(location, str) else tuple(location or ())
        self._items: Dict[str, Any] = {}
        self._imported = not self.locations
        # how the config selects a member ({name}): told when it is given where another registry's name is expected
        self.usage = usage
        if usage:
            _SELECTABLE.append(self)

    def register(self, name: Optional[str] = None) -> Callable[[Any], Any]:
        """Decorator: ``@REG.register()`` uses the object's own name in snake case."""

        def decorator(obj: Any) -> Any:
            key = name or snake_case(obj.__name__)
            if key in self._items and self._items[key] is not obj:
                first = self._items[key]
                # The same definition seen again (a module imported under two names) is fine.
                if _where(first) != _where(obj):
                    raise RegistryError(
                        f"{self.name} registry: name '{key}' is defined twice: "
                        f"{_where(first)} and {_where(obj)}; rename one of them"
                    )
            self._items[key] = obj
            return obj

        return decorator

    def _ensure_imported(self) -> None:
        if not self._imported:
            self._imported = True  # set first: member files may query the registry
            for package in self.locations:
                import_submodules(package)

    def _class_names(self) -> Dict[str, List[str]]:
        """Class name -> registered names, for members whose class name differs from their key."""
        names: Dict[str, List[str]] = {}
        for key, obj in self._items.items():
            own = getattr(obj, "__name__", key)
            if own != key:
                names.setdefault(own, []).append(key)
        return names

    def resolve(self, name: str) -> str:
        """The registered name of ``name`` (itself, or the key of the class called ``name``)."""
        self._ensure_imported()
        if name in self._items:
            return name
        keys = self._class_names().get(name, [])
        if len(keys) == 1:
            return keys[0]
        if len(keys) > 1:
            raise RegistryError(
                f"{self.name} class name '{name}' is ambiguous: it is registered as {', '.join(sorted(keys))}; use one of those names"
            )
        raise RegistryError(self._unknown(name))

    def _class_of(self, key: str) -> Optional[str]:
        """The class name of member ``key`` when it differs from the key, else None."""
        own = getattr(self._items[key], "__name__", key)
        return None if own == key else own

    def _unknown(self, name: str) -> str:
        # the closest of both forms a user may have meant: a registered name or a class name
        forms = {key: key for key in self._items}
        forms.update({cls: keys[0] for cls, keys in self._class_names().items() if len(keys) == 1})
        hint = closest(name, list(forms))
        suggestion = ""
        if hint is not None:
            key, cls = forms[hint], self._class_of(forms[hint])
            suggestion = f"; did you mean '{key}'" + (f" (class {cls})" if cls else "") + "?"
        known = ", ".join(
            key + (f" ({self._class_of(key)})" if self._class_of(key) else "") for key in sorted(self._items)
        )
        # a backbone given as a network (model.name=resnet18): say what it is and where it goes
        other = next((reg for reg in _SELECTABLE if reg is not self and reg.name != self.name and name in reg), None)
        if other is not None:
            return (
                f"unknown {self.name} '{name}': {name} is a {other.name}, not a {self.name}; {other.usage.format(name=name)}; "
                f"known {self.name} names: {known or '(none)'}"
            )
        return f"unknown {self.name} '{name}'; known: {known or '(none)'}{suggestion}"

    def get(self, name: str) -> Any:
        """The object registered under ``name`` (or whose class is called ``name``); RegistryError with suggestions otherwise."""
        return self._items[self.resolve(name)]

    def check(self, name: str, **kwargs: Any) -> Any:
        """The object registered under ``name``, once ``kwargs`` are known to fit its signature
        (an unknown or a missing argument is a ConfigError naming what it takes)."""
        obj = self.get(name)
        _check_arguments(f"{self.name} '{name}'", obj, kwargs)
        return obj

    def build(self, name: str, **kwargs: Any) -> Any:
        """Instantiate (or call) the object registered under ``name`` with ``kwargs``, checked first (``check``).

        The call itself is not wrapped, so an error raised inside the object's own
        code keeps its traceback.
        """
        return self.check(name, **kwargs)(**kwargs)

    def names(self) -> List[str]:
        self._ensure_imported()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._ensure_imported()
        return name in self._items or (isinstance(name, str) and len(self._class_names().get(name, [])) == 1)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.name!r}, {self.names()})"


_SELECTABLE: List[Registry] = []  # the registries a config names members of, with their usage

BACKBONES = Registry(
    "backbone",
    location="backbone",
    usage="a network takes it: model.name=classifier model.args.backbone={name} (model.args.backbone_args: its arguments)",
)
MODULES = Registry("module", location="module")
NETWORKS = Registry("network", location="network", usage="select it with model.name={name}")
LOSSES = Registry("loss", location="loss", usage="use it in loss=[{{name: {name}}}]")
DATASETS = Registry("dataset", location="utils.data.datasets", usage="select it with data.name={name}")
METRICS = Registry("metric", location="utils.metrics", usage="select it with eval.metric={name}")
# the always-on run summary is the framework's; the users' hooks are in hook/
HOOKS = Registry(
    "hook",
    location=("utils.hook.run_summary", "utils.trackers.hooks", "hook"),
    usage="add it with hooks=[{{name: {name}}}]",
)
