"""Shared fixtures: CPU only, one intra-op thread (tests run side by side on small machines)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, FrozenSet, Iterator

import pytest
import torch

if TYPE_CHECKING:
    from tests.fixtures.forked_main import MainServer

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# One thread for the runs in this process too: main.main() keeps an OMP_NUM_THREADS the user set instead of
# taking one thread per core, whose OpenMP threads spin on cores the other processes of the suite need.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# MLflow's usage reports start a thread in every process that makes a client (the suite's own, when it reads a
# server's histories) and try a server outside this machine: the tests have no internet and want no stray threads
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
torch.set_num_threads(1)


def pytest_configure(config) -> None:
    """A torchvision of another build than torch (a CPU torch beside a CUDA torchvision) stops the suite with the
    one line main.py prints, before collection imports torchvision into a traceback per test file."""
    from utils.errors import InstallError
    from utils.torchvision_check import check_torchvision

    try:
        check_torchvision()
    except InstallError as err:
        pytest.exit(f"error: {err}", returncode=2)


@pytest.fixture(autouse=True, scope="session")
def _own_cache_home(tmp_path_factory) -> None:
    """The shard cache's default folder (``$XDG_CACHE_HOME/regtrain-shards``) in the session's temporary folder:
    no test writes into the user's home. Child processes inherit it."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache-home"))


def checkout_entries(root: Path = ROOT) -> FrozenSet[str]:
    """What the checkout holds where a run or a stray file would appear: its top-level entries, and every
    ``output/<experiment>/<run>`` (a run folder a test wrote into the default ``output/``). Two directory
    listings and one per experiment: cheap enough to take around every test."""
    entries = {entry.name for entry in root.iterdir()}
    output = root / "output"
    if output.is_dir():
        for experiment in output.iterdir():
            entries.add(f"output/{experiment.name}")
            if experiment.is_dir() and not experiment.is_symlink():
                entries.update(f"output/{experiment.name}/{run.name}" for run in experiment.iterdir())
    return frozenset(entries)


@pytest.fixture(autouse=True)
def _writes_only_in_its_temporary_folders(request):
    """A test writes only into its temporary folders: a run folder in the checkout's output/ (shown to the user in
    TensorBoard, taken for the user's own run by ``--resume``) or a file beside main.py fails the test that made it."""
    before = checkout_entries()
    yield
    appeared = sorted(checkout_entries() - before)
    if appeared:
        pytest.fail(
            f"{request.node.nodeid} wrote {', '.join(appeared)} into the checkout ({ROOT}); write under tmp_path "
            "(experiment.output_root=..., --output ...) and delete what it wrote (or another process wrote it meanwhile)",
            pytrace=False,
        )


@pytest.fixture
def out_root(tmp_path: Path) -> Path:
    """An output root for one test's runs."""
    path = tmp_path / "output"
    path.mkdir()
    return path


def fast_overrides(out_root: Path, name: str = "t", epochs: int = 2) -> list:
    """Overrides for a quick digits run writing under ``out_root``."""
    return [
        f"experiment.output_root={out_root}",
        f"experiment.name={name}",
        f"train.epochs={epochs}",
        "model.args.backbone_args={widths: [8, 16]}",
    ]


def subprocess_env() -> dict:
    """Environment for child processes: the repo importable, one thread each."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.fixture(scope="session")
def main_server() -> Iterator["MainServer"]:
    """``python main.py`` runs of the checkout forked from one process that imported torch once
    (``tests/fixtures/forked_main.py``), shared by the test files of this worker: each run is a process of its own
    with the environment its request gives."""
    from tests.fixtures.forked_main import shared

    yield shared(ROOT, subprocess_env())  # also the one torchrun's workers ask (tests/fixtures/dist_utils.py)
