"""Files read at the edges of the process, configs: a loaded config (YAML file, override, a checkpoint's config) is
a plain tree of bounded size and depth; a cycle or a shared tree of 2^40 nodes is one error line, at once. YAML
anchors and merge keys still work, and the loaded config shares no container."""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator

import pytest
import torch

import main
from tests.fixtures.crafted import checkpoint_data, errors_of
from utils.checkpoint.state import Checkpoint
from utils.config.plain_tree import tree_problem
from utils.config.typed_merge import load_yaml
from utils.errors import CheckpointError


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail instead of hanging (what a 2^40-node config did)."""

    def stop(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


# -- F2: a loaded config is a plain tree --------------------------------------------------------------------------


def shared_tree(levels: int = 40) -> list:
    """``x = [x, x]`` ``levels`` times: a few bytes pickled, 2^levels nodes walked."""
    tree: list = ["a"]
    for _ in range(levels):
        tree = [tree, tree]
    return tree


def test_a_checkpoint_whose_config_expands_to_2_to_the_40_nodes_is_refused_at_once(tmp_path, capsys):
    file = tmp_path / "crafted.pt"
    torch.save(checkpoint_data(config={"data": {"args": {"classes": shared_tree()}}}), file)
    assert file.stat().st_size < 200_000
    with within(60):
        assert main.main(["--mode", "test", "--checkpoint", str(file)]) == 2
    (line,) = errors_of(capsys)
    assert line.startswith(
        f"error: checkpoint '{file}' entry 'config' is a dict that holds more than 1,000,000 values written out"
    )
    assert line.endswith("the file is damaged or not a checkpoint of this framework")
    with pytest.raises(CheckpointError, match="entry 'classes' is a list that contains itself"):
        looped: list = ["a"]
        looped.append(looped)
        Checkpoint(checkpoint_data(classes=looped))


@pytest.mark.parametrize(
    "yaml_text, expected",
    [
        ("hooks: &a [*a]\n", "the YAML contains itself at 'hooks[0]' (a cycle: it refers to 'hooks', which holds it)"),
        ("data:\n  args: {a: &x [1, 2], b: *x}\nhooks: &h [*h]\n", "the YAML contains itself at 'hooks[0]'"),
        ("data:\n  args: {a: " + "[" * 3000 + "]" * 3000 + "}\n", "the YAML nests collections too deeply to read"),
    ],
)
def test_a_yaml_config_that_is_no_plain_tree_is_one_error_line(yaml_text, expected, tmp_path, capsys):
    """A self-reference was a raw RecursionError in the check for glued keys."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml_text)
    assert main.main(["--config", str(path)]) == 2
    (line,) = errors_of(capsys)
    assert line.startswith(f"error: config file '{path}': {expected}"), line
    # an override too
    assert main.main(["data.args={a: &x [*x]}"]) == 2 and "contains itself at 'a[0]'" in errors_of(capsys)[0]


def test_yaml_anchors_share_values_and_each_place_is_its_own_after_loading():
    """A merge key (``<<: *base``) and an alias are ordinary YAML; the loaded config shares no container."""
    data = load_yaml("base: &b {lr: 1, sizes: [1, 2]}\nexp:\n  <<: *b\n  lr: 2\nalso: *b\n")
    assert data == {
        "base": {"lr": 1, "sizes": [1, 2]},
        "exp": {"lr": 2, "sizes": [1, 2]},
        "also": {"lr": 1, "sizes": [1, 2]},
    }
    data["exp"]["sizes"].append(3)
    assert data["base"]["sizes"] == [1, 2] and data["also"] is not data["base"]


def test_the_tree_check_bounds_size_and_depth_without_recursing():
    assert tree_problem({"a": [1, 2, {"b": "c"}], "d": (), "e": ()}) is None  # () is one shared object: harmless
    assert tree_problem(list(range(11)), max_nodes=10).startswith("holds more than 10 values written out")
    assert tree_problem(shared_tree(3)) is None and tree_problem(shared_tree(4), max_nodes=20).startswith(
        "holds more than 20 values"
    )
    deep: list = []
    for _ in range(5000):
        deep = [deep, 1]
    assert tree_problem(deep).startswith("is nested more than 100 levels deep at '[0][0]")
