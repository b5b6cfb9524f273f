"""Start-up pays only for what a run uses: ``import main`` and the registries leave torchvision unimported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT, subprocess_env

pytestmark = pytest.mark.slow  # a fresh interpreter

PROBE = """
import sys
import main
from utils.registry import BACKBONES, DATASETS, HOOKS, LOSSES, METRICS, MODULES, NETWORKS
for registry in (BACKBONES, DATASETS, HOOKS, LOSSES, METRICS, MODULES, NETWORKS):
    registry.names()  # imports every plugin file
heavy = ("torchvision", "thop", "sklearn", "tensorboard", "nvidia.dali", "py_sod_metrics", "torch._dynamo", "torch._inductor")
print(sorted(name for name in heavy if name in sys.modules))
"""


def test_import_main_and_every_plugin_file_without_the_heavy_optional_modules():
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
