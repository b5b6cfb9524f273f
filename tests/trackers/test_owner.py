"""Which folder a spool belongs to (``utils/trackers/owner.py``): a copy whose original still holds its tracker run is
set aside; a folder moved, or the same storage reached under another path, keeps its tracker run."""

from __future__ import annotations

import json
import shutil

from tests.trackers.identities import MLFLOW
from utils.trackers.owner import made_elsewhere
from utils.trackers.spool import Spool


def made_in(run, **more):
    """A run folder whose mlflow identity was made there."""
    (run / "trackers").mkdir(parents=True)
    identity = {**MLFLOW, "folder": str(run.resolve()), **more}
    (run / "trackers" / "mlflow.json").write_text(json.dumps(identity))
    return run


def test_a_copy_of_a_folder_that_still_holds_the_run_is_a_copy(tmp_path):
    original = made_in(tmp_path / "run_001")
    copy = tmp_path / "run_002"
    shutil.copytree(original, copy)
    assert made_elsewhere(Spool(copy / "trackers", "mlflow"), copy) == str(original.resolve())
    assert made_elsewhere(Spool(original / "trackers", "mlflow"), original) is None


def test_an_original_that_cannot_be_read_counts_as_there(tmp_path):
    original = made_in(tmp_path / "run_001")
    copy = tmp_path / "run_002"
    shutil.copytree(original, copy)
    (original / "trackers" / "mlflow.json").write_text("{cut")
    assert made_elsewhere(Spool(copy / "trackers", "mlflow"), copy) == str(original.resolve())


def test_a_moved_folder_or_one_whose_original_holds_another_run_keeps_its_run(tmp_path):
    original = made_in(tmp_path / "run_001")
    moved = tmp_path / "elsewhere" / "run_001"
    shutil.move(original, moved)
    spool = Spool(moved / "trackers", "mlflow")
    assert made_elsewhere(spool, moved) is None
    assert json.loads(spool.identity_path.read_text())["folder"] == str(moved.resolve())  # this folder's now
    made_in(original, folder_id="another")  # a new run made where it was
    again = made_in(tmp_path / "third" / "run_001")
    json_path = again / "trackers" / "mlflow.json"
    json_path.write_text(json.dumps({**json.loads(json_path.read_text()), "folder": str(original.resolve())}))
    assert made_elsewhere(Spool(again / "trackers", "mlflow"), again) is None


def test_the_same_folder_under_another_path_keeps_its_run(tmp_path):
    run = made_in(tmp_path / "storage" / "run_001")
    (tmp_path / "mount").mkdir()
    (tmp_path / "mount" / "run_001").symlink_to(run)  # here() resolves it: the same folder
    seen = tmp_path / "mount" / "run_001"
    assert made_elsewhere(Spool(seen / "trackers", "mlflow"), seen) is None
    identity = run / "trackers" / "mlflow.json"  # a bind mount's path does not resolve to the other: named so here
    identity.write_text(
        json.dumps({**json.loads(identity.read_text()), "folder": str(tmp_path / "mount2" / "run_001")})
    )
    (tmp_path / "mount2").symlink_to(tmp_path / "storage")
    assert made_elsewhere(Spool(run / "trackers", "mlflow"), run) is None  # the file there is this very file
