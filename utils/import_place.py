"""Where a ``custom_imports`` module would be loaded from, found without running any of it, and the refusal of one
that lies in a results folder.

Results are data: a run folder, or an output root that holds runs, is something others may hand over, and the
project root (``output/`` is under it) is on ``sys.path`` when ``main.py`` runs. A module found there
(``output.exp.run_001.plugin``, whatever names it: a config, an override, a run's own config.yaml) is refused
before anything of it runs, its packages' ``__init__`` files included.
"""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Union

from utils.config.schema import ExperimentConfig
from utils.errors import ConfigError
from utils.run.folder import is_numbered_run

PROJECT = Path(__file__).resolve().parents[1]  # main.py's folder: on sys.path when main.py runs
# the output roots every import is kept out of: the default one, as a path from the working folder and in the project
DEFAULT_ROOTS = (Path(ExperimentConfig.output_root), PROJECT / ExperimentConfig.output_root)


def _finder(folder: str) -> Any:
    """The path entry finder of ``folder``, as the import system would make it (a FileFinder, a zipimporter)."""
    if folder in sys.path_importer_cache:
        return sys.path_importer_cache[folder]
    for hook in sys.path_hooks:
        try:
            return hook(folder)
        except ImportError:  # not this hook's kind of folder
            continue
    return None


def _submodule_spec(name: str, folders: Sequence[str]) -> Optional[ModuleSpec]:
    """``name`` searched in its parent package's ``folders`` as PathFinder does, without importing the parent
    (``PathFinder.find_spec`` looks a namespace parent up in ``sys.modules``); a namespace package's portions joined."""
    portions: List[str] = []
    for folder in folders:
        finder = _finder(folder)
        spec = finder.find_spec(name) if finder is not None and hasattr(finder, "find_spec") else None
        if spec is None:
            continue
        if spec.loader is not None:
            return spec
        portions += list(spec.submodule_search_locations or [])
    if not portions:
        return None
    spec = ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = portions
    return spec


def _spec(name: str, parent: Optional[ModuleSpec]) -> Optional[ModuleSpec]:
    """``name``'s spec, the module unrun: one imported already, a top-level one by the import system's finders
    (which run nothing), a submodule by searching its parent's folders (importlib would import the parent)."""
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__spec__", None)
    if parent is not None:
        return _submodule_spec(name, list(parent.submodule_search_locations or []))
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):  # the import itself names what is wrong
        return None


def module_places(name: str) -> Iterator[Path]:
    """The files and folders that importing ``name`` would run or search: each package's on the way, then the
    module's; as far as they are found (an unknown name: the import's own error says so)."""
    parent = None
    parts = name.split(".")
    for depth in range(1, len(parts) + 1):
        spec = _spec(".".join(parts[:depth]), parent)
        if spec is None:
            return
        if spec.origin and spec.has_location:
            yield Path(spec.origin)
        yield from (Path(folder) for folder in spec.submodule_search_locations or [])
        if not spec.submodule_search_locations:
            return
        parent = spec


def _results_folder(place: Path, roots: Iterable[Path]) -> Optional[str]:
    """What results folder ``place`` lies in (a run folder, one of ``roots``), else None."""
    resolved = place.resolve()
    for folder in (resolved, *resolved.parents):
        if is_numbered_run(folder):
            return f"the run folder '{folder}'"
    for root in roots:
        if resolved == root or root in resolved.parents:
            return f"the results folder '{root}'"
    return None


def check_import_place(name: str, results: Sequence[Union[str, Path]] = ()) -> None:
    """ConfigError when importing ``name`` would run a file, or search a folder, inside a run folder or a folder of
    results (``results``: the run's output root, the PATHs compare reads; and ``DEFAULT_ROOTS``): results are data,
    never imported."""
    roots = [Path(root).expanduser().resolve() for root in (*results, *DEFAULT_ROOTS)]
    # a root that holds the project (experiment.output_root=.) holds the code too: only its run folders are results
    roots = [root for root in roots if root != PROJECT and root not in PROJECT.parents]
    for place in module_places(name):
        where = _results_folder(place, roots)
        if where is not None:
            raise ConfigError(
                f"custom_imports: module '{name}' would load '{place}', inside {where}; results are data and are never "
                "imported: move the module into a package of your own outside every results folder, and name that"
            )
