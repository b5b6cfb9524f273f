"""The project's structural rules (../shared/DESIGN.md, Conventions), checked on the source itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Iterator, List, Set, Tuple

import pytest

from tests.conftest import ROOT

PLUGIN_FOLDERS = ("backbone", "module", "network", "loss", "hook")
# imports only the standard library, yaml and each other: usable by everything, depending on nothing
LEAVES = (
    "utils/registry.py",
    "utils/config.py",
    "utils/config_checks.py",
    "utils/config_load.py",
    "utils/config_resume.py",
    "utils/config_rules.py",
    "utils/errors.py",
    "utils/typed_merge.py",
    "utils/yaml_load.py",
    "utils/plain_tree.py",
    "utils/hook/__init__.py",
)
MAX_PARAMETERS = 8
MAX_LINES = 300


def sources() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] not in (".venv", "venv", ".git", "build", "output") and not rel.parts[0].endswith(".egg-info"):
            yield path


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


def test_only_the_engine_imports_the_engine_and_nothing_imports_main():
    for path in sources():
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("tests", "benchmarks"):
            continue  # tests drive main.py in-process; benchmarks time the engine
        modules = imports_of(path)
        assert not [m for m in modules if under(m, "main")], f"{rel} imports main"
        if rel.parts[0] == "utils" and (len(rel.parts) < 2 or rel.parts[1] != "engine"):
            assert not [m for m in modules if under(m, "utils.engine")], f"{rel} imports utils.engine"


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


def test_no_function_takes_more_than_8_parameters_except_registered_constructors():
    assert functions_over_the_limit() == []


def test_no_source_file_is_over_300_lines():
    long = [(str(p.relative_to(ROOT)), n) for p in sources() if (n := p.read_text().count("\n")) > MAX_LINES]
    assert long == []
