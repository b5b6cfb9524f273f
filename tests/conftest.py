"""Shared fixtures: CPU only, one intra-op thread (tests run side by side on small machines)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# One thread for the runs in this process too: main.main() keeps an OMP_NUM_THREADS the user set instead of
# taking one thread per core, whose OpenMP threads spin on cores the other processes of the suite need.
os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _own_cache_home(tmp_path_factory) -> None:
    """The shard cache's default folder (``$XDG_CACHE_HOME/regtrain-shards``) in the session's temporary folder:
    no test writes into the user's home. Child processes inherit it."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache-home"))


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
