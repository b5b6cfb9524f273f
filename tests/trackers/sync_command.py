"""``python -m utils.trackers sync RUN`` as a user runs it, for the tracker tests."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Optional

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON


def sync(run: Path, store: Optional[str] = None) -> subprocess.CompletedProcess:
    """``sync RUN``, the user naming the MLflow ``store`` (``MLFLOW_TRACKING_URI``; none: the environment's)."""
    cmd = [PYTHON, "-m", "utils.trackers", "sync", str(run)]
    env = {**subprocess_env(), **({"MLFLOW_TRACKING_URI": store} if store else {})}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def sync_runs(runs, prelude: str = "") -> subprocess.CompletedProcess:
    """``sync RUN [RUN ...]`` as ``sync`` runs it, after ``prelude`` (Python run first in that process: a tracker
    library hidden as if not installed, a bug planted in one folder's sync)."""
    code = f"{prelude}\nimport sys\nfrom utils.trackers.__main__ import main\nsys.exit(main(sys.argv[1:]))"
    cmd = [PYTHON, "-c", code, "sync", *map(str, runs)]
    return subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=120)
