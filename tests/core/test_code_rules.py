"""The project's structural rules (../shared/DESIGN.md, Conventions), checked on the source itself."""

from __future__ import annotations

import ast
import functools
import sys
from collections import deque
from pathlib import Path
from typing import Dict, FrozenSet, Iterator, List, Set, Tuple

import pytest

from tests.conftest import ROOT
from tests.core.file_writes import WRITES_ELSEWHERE, writes_files

PLUGIN_FOLDERS = ("backbone", "module", "network", "loss", "hook")
# imports only the standard library, yaml and each other: usable by everything, depending on nothing
LEAVES = (
    "utils/registry.py",
    "utils/config/schema.py",
    "utils/config/checks.py",
    "utils/config/load.py",
    "utils/config/resume.py",
    "utils/config/rules.py",
    "utils/config/given.py",
    "utils/errors.py",
    "utils/secret_text.py",
    "utils/files/owned.py",
    "utils/undecodable.py",
    "utils/config/typed_merge.py",
    "utils/config/key_hints.py",
    "utils/config/yaml_load.py",
    "utils/config/plain_tree.py",
    "utils/hook/__init__.py",
)
MAX_PARAMETERS = 8


def sources() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in (".venv", "venv", ".git", "build", "output") and not rel.parts[0].endswith(".egg-info"):
            yield path


@functools.lru_cache(maxsize=None)  # each file parsed once for all the rules
def imports_of(path: Path) -> Set[str]:
    """Every module ``path`` imports (absolute names), also inside functions."""
    found: Set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_leaf_modules_import_only_the_standard_library_yaml_and_each_other():
    leaves = {path[:-3].replace("/", ".") for path in LEAVES}
    stdlib = getattr(sys, "stdlib_module_names", None)
    if stdlib is None:
        pytest.skip("sys.stdlib_module_names needs Python >= 3.10")
    for path in LEAVES:
        for module in imports_of(ROOT / path):
            top = module.split(".")[0]
            ok = (
                top in stdlib
                or top == "yaml"
                or module in leaves
                or module == "utils"
                or any(under(module, leaf) for leaf in leaves)
            )
            assert ok, f"{path} imports {module}"


def test_plugin_folders_never_import_the_engine_or_main():
    for path in sources():
        rel = path.relative_to(ROOT)
        if rel.parts[0] in PLUGIN_FOLDERS:
            bad = [m for m in imports_of(path) if under(m, "utils.engine") or under(m, "main")]
            assert not bad, f"{rel} imports {bad}"


def test_only_the_engine_and_the_commands_import_the_engine_and_nothing_imports_main():
    """The commands (one module per mode) sit above the engine: only ``main.py`` imports them."""
    for path in sources():
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", "benchmarks"):
            continue  # tests drive main.py in-process; benchmarks time the engine
        modules = imports_of(path)
        assert not [m for m in modules if under(m, "main")], f"{rel} imports main"
        folder = rel.parts[1] if rel.parts[0] == "utils" and len(rel.parts) > 2 else None
        if rel.parts[0] == "utils" and folder not in ("engine", "commands"):
            assert not [m for m in modules if under(m, "utils.engine")], f"{rel} imports utils.engine"
        if rel.parts[0] != "main.py" and folder != "commands":
            assert not [m for m in modules if under(m, "utils.commands")], f"{rel} imports utils.commands"


def product_modules() -> Dict[str, Path]:
    """The product's modules by name (``utils.config.schema``, ``utils.data`` for its ``__init__.py``): main.py, utils/
    and the plugin folders."""
    found = {}
    for path in sources():
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("utils", *PLUGIN_FOLDERS) or str(rel) == "main.py":
            parts = rel.with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph() -> Dict[str, Set[str]]:
    """Which product modules each product module imports: at the top, inside functions (lazy) and under
    ``TYPE_CHECKING`` alike, each a dependency whenever it runs. ``from a import b`` is module ``a.b`` when that
    is a module, else ``a``."""
    modules = product_modules()

    def module_of(name: str) -> str:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name

    graph = {}
    for name, path in modules.items():
        graph[name] = {found for m in imports_of(path) if (found := module_of(m))} - {name}
    return graph


def cycle_groups(graph: Dict[str, Set[str]]) -> List[FrozenSet[str]]:
    """The groups of modules that import each other in a circle (strongly connected components of two or more,
    Tarjan's algorithm)."""
    order: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    groups: List[FrozenSet[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(frozenset(group))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return groups


def a_cycle(graph: Dict[str, Set[str]], group: FrozenSet[str]) -> str:
    """One shortest circle through the group's first module, as ``a -> b -> a``."""
    start = min(group)
    came_from: Dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & group):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(came_from[path[-1]])
                return " -> ".join([*reversed(path), start])
            if nxt not in came_from:
                came_from[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no circle through {start}")


def test_product_modules_import_each_other_in_no_cycle():
    graph = import_graph()
    assert {"main", "utils.config.schema", "utils.data", "network.classifier"} <= set(graph)
    groups = cycle_groups(graph)
    found = [f"{a_cycle(graph, group)} (the modules in its circles: {', '.join(sorted(group))})" for group in groups]
    assert found == [], "import cycles among product files (break each; a lazy import does not)"


def test_the_cycle_check_finds_a_circle_through_a_lazy_import(tmp_path):
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycle_groups(graph) == [frozenset("abc")] and a_cycle(graph, frozenset("abc")) == "a -> b -> c -> a"
    lazy = tmp_path / "lazy.py"
    lazy.write_text("import os\n\n\ndef f():\n    from utils.config.schema import Config\n    return Config\n")
    assert "utils.config.schema" in imports_of(lazy)


def registered_classes(tree: ast.Module) -> Set[str]:
    """Classes decorated with ``@<REGISTRY>.register(...)`` (their constructor takes config options)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for deco in node.decorator_list:
                call = deco.func if isinstance(deco, ast.Call) else deco
                if isinstance(call, ast.Attribute) and call.attr == "register":
                    names.add(node.name)
    return names


def functions_over_the_limit() -> List[Tuple[str, int, str, int]]:
    found = []
    for path in sources():
        tree = ast.parse(path.read_text())
        exempt = registered_classes(tree)
        owner = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            args = node.args
            names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
            if names and names[0] in ("self", "cls"):
                names = names[1:]
            parent = owner.get(node)
            registered_init = node.name == "__init__" and isinstance(parent, ast.ClassDef) and parent.name in exempt
            if len(names) > MAX_PARAMETERS and not registered_init:
                found.append((str(path.relative_to(ROOT)), node.lineno, node.name, len(names)))
    return found


@pytest.mark.slow  # over 2 s
def test_no_function_takes_more_than_8_parameters_except_registered_constructors():
    assert functions_over_the_limit() == []


def test_files_are_written_under_a_run_s_folders_only_through_owned_files():
    found = []
    for path in sources():
        rel = path.relative_to(ROOT).as_posix()
        if rel.split("/")[0] not in ("utils", *PLUGIN_FOLDERS) and rel != "main.py" or rel == "utils/files/owned.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and writes_files(node):
                found.append(f"{rel}: {ast.unparse(node.func)}")
    assert [f for f in found if f not in WRITES_ELSEWHERE] == [], "write through utils/files/owned.py"
    assert sorted(set(WRITES_ELSEWHERE) - set(found)) == [], "allowed writes that are gone: drop them from the list"
    bad = ast.parse("open(p, 'w'); os.replace(a, b); Path(p).open('a'); shutil.rmtree(p); os.open(p, os.O_CREAT)")
    bad.body += ast.parse("image.save(run / 'x.png'); image.save(fh, format='PNG'); open(p, 'rb')").body
    flagged = [ast.unparse(n.func) for n in ast.walk(bad) if isinstance(n, ast.Call) and writes_files(n)]
    assert flagged == ["open", "os.replace", "Path(p).open", "shutil.rmtree", "os.open", "image.save"]


def test_the_data_folders_import_downwards_and_the_folder_datasets_never_branch_on_a_pack():
    """``datasets/`` -> ``sources/`` -> ``shards/``: a reader never imports a dataset, the pack format no reader;
    the folder datasets read through ``open_source`` and never ask whether it opened a pack."""
    data = ROOT / "utils" / "data"
    above = {"shards": ("utils.data.sources", "utils.data.datasets"), "sources": ("utils.data.datasets",)}
    found = [
        f"{path.relative_to(ROOT)} imports {module}"
        for folder, higher in above.items()
        for path in sorted((data / folder).glob("*.py"))
        for module in sorted(imports_of(path))
        if any(under(module, package) for package in higher)
    ]
    for name in ("image_folder.py", "image_mask_folder.py", "video_frames_folder.py"):
        text = (data / "datasets" / name).read_text()
        found += [f"utils/data/datasets/{name} says {word}" for word in ("packed", "PackedSplit") if word in text]
    assert found == []


def folder_graph(graph: Dict[str, Set[str]]) -> Dict[str, Set[str]]:
    """The imports between siblings: an import from ``a.b.c`` of ``a.d.e`` is an edge ``a.b -> a.d`` (the two
    children of their deepest common folder), so a loop between two folders, or between a folder and a loose
    module beside it, shows as a cycle at the level where they meet."""
    edges: Dict[str, Set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            a, b = source.split("."), target.split(".")
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            if common < len(a) and common < len(b):  # neither holds the other (a package and its own modules)
                edges.setdefault(".".join(a[: common + 1]), set()).add(".".join(b[: common + 1]))
    for targets in list(edges.values()):
        for target in targets:
            edges.setdefault(target, set())
    return edges


def test_folders_import_each_other_in_no_loop():
    """No loop between folders (utils/compare -> utils/trackers -> utils/sweep -> utils/compare was one): each
    folder is one floor, and imports reach down only."""
    graph = folder_graph(import_graph())
    assert {"utils.data", "utils.engine"} <= set(graph)
    found = [a_cycle(graph, group) for group in cycle_groups(graph)]
    assert found == [], "import loops between folders (move the shared piece down a floor)"


def test_the_folder_graph_joins_siblings_where_they_meet():
    graph = {"u.a.x": {"u.b.y"}, "u.b.y": {"u.a.z"}, "u.a": {"u.a.x"}, "u.a.z": set()}
    folders = folder_graph(graph)
    assert folders["u.a"] == {"u.b"} and folders["u.b"] == {"u.a"}
    assert cycle_groups(folders) == [frozenset({"u.a", "u.b"})]
