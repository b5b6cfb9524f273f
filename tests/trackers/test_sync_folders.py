"""``python -m utils.trackers sync RUN [RUN ...]`` as a user runs it: a folder's bad files or a tracker library that is
not installed are one ``error:`` line (exit 2), a bug in one folder is logged with its traceback (exit 1), and
either way every other folder named is still tried. No server is needed: a spool with nothing waiting sends nothing."""

from __future__ import annotations

import json

from tests.trackers.identities import MLFLOW
from tests.trackers.sync_command import sync, sync_runs

IDENTITY = MLFLOW
HIDE_MLFLOW = "import sys\nsys.modules['mlflow'] = None  # as if not installed"
PLANT_BUG = """
import utils.trackers.__main__ as cli
real = cli.sync
def planted(run):
    if run.name == "buggy":
        raise RuntimeError("a planted bug")
    return real(run)
cli.sync = planted
"""


def run_folder(root, name, identity, lines=""):
    """A run folder whose mlflow tracker holds ``identity`` and the records file ``lines``."""
    trackers = root / name / "trackers"
    trackers.mkdir(parents=True)
    (trackers / "mlflow.json").write_text(identity if isinstance(identity, str) else json.dumps(identity))
    (trackers / "mlflow.jsonl").write_text(lines)
    return root / name


def error_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("error: ")]


def test_a_bad_identity_or_records_file_is_one_error_line(tmp_path):
    for n, identity in enumerate([{**IDENTITY, "sent": "abc"}, {"folder_id": "f", "backend": "mlflow"}, "{cut"]):
        done = sync(run_folder(tmp_path, f"run_00{n}", identity))
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        (line,) = error_lines(done.stderr)
        assert f"run_00{n}/trackers/mlflow.json" in line and "remove the run's trackers/ folder" in line, line
    # a records file of lines that are no record: nothing to send, said once, exit 0
    lines = (
        '{"t": 1, "metrics": {"a": 1}}\n{"t": 1, "step": "x", "metrics": {}}\n{"t": 2, "artifact": "/etc/hostname"}\n'
    )
    done = sync(run_folder(tmp_path, "run_009", IDENTITY, lines))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "3 line(s) of" in done.stderr and "are no record; they are skipped" in done.stderr
    assert "run_009: 0 record(s) sent" in done.stdout


def test_a_tracker_library_not_installed_is_one_line_naming_the_extra(tmp_path):
    line = '{"t": 1, "step": 0, "metrics": {"a": 1.0}}\n'
    done = sync_runs([run_folder(tmp_path, "run_001", IDENTITY, line)], prelude=HIDE_MLFLOW)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (error,) = error_lines(done.stderr)
    assert 'needs the mlflow library, which is not installed: pip install -e ".[mlflow]"' in error, error


def test_each_folder_goes_on_its_own(tmp_path):
    buggy = run_folder(tmp_path, "buggy", IDENTITY)
    bad = run_folder(tmp_path, "bad", {**IDENTITY, "run_id": "a'b"})
    good = run_folder(tmp_path, "good", IDENTITY)
    done = sync_runs([buggy, bad, good], prelude=PLANT_BUG)
    assert done.returncode == 1, done.stderr  # a bug anywhere: exit 1, after every folder was tried
    assert "Traceback" in done.stderr and "RuntimeError: a planted bug" in done.stderr
    assert f"sync of {buggy} failed" in done.stderr
    (line,) = error_lines(done.stderr)
    assert "bad/trackers/mlflow.json" in line and "has run_id=" in line
    assert f"{good}: 0 record(s) sent" in done.stdout
    done = sync_runs([bad, good, tmp_path / "missing"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(error_lines(done.stderr)) == 2 and f"{good}: 0 record(s) sent" in done.stdout
