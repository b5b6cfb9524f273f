"""The install puts none of the framework's folders on the import path of other programs."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # fresh interpreters

FOLDERS = ("utils", "hook", "loss", "module", "network", "backbone", "main")


def test_a_program_elsewhere_imports_its_own_utils_not_the_frameworks(tmp_path):
    project = tmp_path / "project"
    (project / "utils").mkdir(parents=True)
    (project / "utils" / "__init__.py").write_text("OWNER = 'user'\n")
    probe = (
        "import importlib.util, sys\n"
        "import utils\n"
        f"others = [n for n in {FOLDERS!r} if n != 'utils' and (s := importlib.util.find_spec(n)) and s.origin and s.origin.startswith({str(ROOT)!r})]\n"
        "print(utils.OWNER, others)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # no PYTHONPATH: what the environment itself provides
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["user", "[]"]
    # run from elsewhere, the user's module path comes after the installed ones: the framework's utils must not be there
    elsewhere = subprocess.run(
        [
            sys.executable,
            "-c",
            "import importlib.util; s = importlib.util.find_spec('utils'); print(s.origin if s else None)",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert not elsewhere.stdout.strip().startswith(str(ROOT)), elsewhere.stdout
