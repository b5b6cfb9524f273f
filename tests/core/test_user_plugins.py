"""A user's own plugin never fails the suite: the "Add a network" and "Add a hook" files of docs/plugins.md, written
as a user would, go through the registry test (tests/core/test_registered_items.py) built with their defaults.

Following those two sections made ``test_registered_items`` fail with ``add an example for network/my_net
to EXAMPLES``, although the docs say that no other file changes; and once the user's own ``network/my_net.py``
was there, importing the docs' copy of it made every test here error with ``name 'my_net' is defined twice``: a test had put a second copy of the docs'
files into the suite's own registries. The docs' files are registered here only in copies of the registries that
leave their names out, and the user's case itself runs where it happens: in a copy of the repository with the
docs' files in place, in a process of its own (``test_the_fast_tests_pass_with_the_docs_plugin_files_in_place``)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from tests.conftest import subprocess_env
from tests.core import test_registered_items as registered
from tests.fixtures.docs_pages import created_file
from tests.fixtures.fresh_copy import fresh_copy
from utils.registry import HOOKS, NETWORKS


def readme_file(path: str) -> str:
    """The code block the documentation (docs/plugins.md) gives for ``Create `path`:``."""
    return created_file(path)


# what the docs' two files register, by registered name and by class name
DOCS_ITEMS = {NETWORKS: ("my_net", "MyNet"), HOOKS: ("lr_printer", "LrPrinter")}


@pytest.fixture
def user_plugins(tmp_path, monkeypatch):
    """The README's network/my_net.py and hook/lr_printer.py imported from a user's folder, registered in copies of
    the registries (the real ones stay as they were for the other tests). A user who followed the docs has
    these names in the checkout already (network/my_net.py, perhaps changed since): the copies leave them out,
    so the docs' own files are what is tested here."""
    for registry, names in DOCS_ITEMS.items():
        registry.names()  # the framework's own items imported first, as a run would
        items = {
            key: obj for key, obj in registry._items.items() if not {key, getattr(obj, "__name__", key)} & set(names)
        }
        monkeypatch.setattr(registry, "_items", items)
    folder = tmp_path / "user_code"
    folder.mkdir()
    (folder / "readme_my_net.py").write_text(readme_file("network/my_net.py"))
    (folder / "readme_lr_printer.py").write_text(readme_file("hook/lr_printer.py"))
    monkeypatch.syspath_prepend(str(folder))
    names = ("readme_my_net", "readme_lr_printer")
    for name in names:
        importlib.import_module(name)
    yield folder
    for name in names:
        sys.modules.pop(name, None)


def test_the_readme_s_network_and_hook_pass_the_registry_test_with_their_defaults(user_plugins, tmp_path):
    assert "my_net" in registered.framework_items(NETWORKS) and "lr_printer" in registered.framework_items(HOOKS)
    registered.test_network("my_net")  # built with num_classes filled in, run on grey images (small_cnn's input)
    registered.test_hook("lr_printer", tmp_path / "hook")  # two epochs and a test of the harness


# the fast tests that import every registry (every file of backbone/, network/, hook/, ...) and build what they hold
REGISTRY_TESTS = (
    "tests/core/test_user_plugins.py",
    "tests/core/test_registered_items.py",
    "tests/core/test_registry.py",
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_fast_tests_pass_with_the_docs_plugin_files_in_place(tmp_path):
    """Following "Add a network" and "Add a hook" made the fast suite error with "name 'my_net' is defined twice"
    (three times in a row): here the docs' files are written into a copy of the repository exactly as the docs say,
    and the fast tests that load every registry run there, in a process of their own."""
    repo = tmp_path / "repo"
    if not fresh_copy(repo):
        pytest.skip("not a git checkout")
    for path in ("network/my_net.py", "hook/lr_printer.py"):
        (repo / path).write_text(readme_file(path))
    env = {**subprocess_env(), "PYTHONPATH": str(repo)}
    command = [sys.executable, "-m", "pytest", "-m", "not slow", "-q", "-p", "no:cacheprovider", *REGISTRY_TESTS]
    proc = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1] and "error" not in proc.stdout.splitlines()[-1]


def test_a_plugin_that_needs_arguments_is_skipped_with_what_to_add(user_plugins):
    class NeedsSizes:  # a required argument the test cannot guess
        def __init__(self, sizes: list) -> None:
            self.sizes = sizes

    NETWORKS.register("needs_sizes")(NeedsSizes)
    with pytest.raises(pytest.skip.Exception, match=r"NeedsSizes needs \['sizes'\]: add an example to EXAMPLES"):
        registered.test_network("needs_sizes")


def test_the_readme_s_network_uses_its_width(user_plugins):
    narrow, wide = NETWORKS.build("my_net", num_classes=10, width=4), NETWORKS.build("MyNet", num_classes=10, width=32)
    assert sum(p.numel() for p in wide.head.parameters()) > sum(p.numel() for p in narrow.head.parameters())
