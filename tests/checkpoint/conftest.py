"""Checkpoints trained once for the checkpoint tests that load them (tests/checkpoint/test_safe_loading.py,
test_checkpoint_formats.py, test_resume_folders.py): package-scoped, so the split files share one run of each."""

from __future__ import annotations

from pathlib import Path

import pytest

import main
from tests.conftest import fast_overrides


@pytest.fixture(scope="package")
def best(tmp_path_factory) -> Path:
    """best.pt of one short run (digits, a small CNN, EMA on) in <root>/t/run_001: a checkpoint of the current format."""
    out = tmp_path_factory.mktemp("trained")
    assert main.main([*fast_overrides(out, "t", epochs=1), "train.iterations=2", "train.ema={decay: 0.9}"]) == 0
    return out / "t" / "run_001" / "checkpoints" / "best.pt"


@pytest.fixture(scope="package")
def sharded(tmp_path_factory) -> Path:
    """One short dist.mode=fsdp run in this process: its best.dcp is a sharded checkpoint directory."""
    out = tmp_path_factory.mktemp("sharded")
    assert main.main([*fast_overrides(out, "f", epochs=1), "train.iterations=2", "dist.mode=fsdp"]) == 0
    return (out / "f" / "latest" / "checkpoints" / "best.dcp").resolve()
