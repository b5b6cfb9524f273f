"""``python -m utils.trackers sync RUN`` as a user runs it, for the tracker tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON


def sync(run: Path) -> subprocess.CompletedProcess:
    cmd = [PYTHON, "-m", "utils.trackers", "sync", str(run)]
    return subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120)
