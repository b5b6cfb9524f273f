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


MODE_PROBE = """
import sys
import main
loaded = sorted(name for name in sys.modules if name.startswith("torch") and "." not in name)
try:
    main.main(["--mode", "compare", "--help"])
except SystemExit:
    pass
print(loaded, sorted(name for name in sys.modules if name.startswith(("utils.commands.", "utils.engine."))))
"""


def test_main_loads_no_torch_and_compare_imports_its_own_command_only():
    out = subprocess.run(
        [sys.executable, "-c", MODE_PROBE], cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    # torch is loaded by the mode's command, after main.py's OpenMP setting; compare's loads no engine
    assert out.stdout.strip().splitlines()[-1] == (
        "[] ['utils.commands.command_line', 'utils.commands.compare', 'utils.commands.options']"
    )
