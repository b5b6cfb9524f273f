"""A tracker run belongs to the run folder it was made in (a local SQLite store, real runs):

- a copy of a run folder, resumed, gets an MLflow run of its own, tagged with the one its checkpoint was logged to,
  and the original's MLflow run gets nothing of the copy's steps; the copy's records of the original are set aside;
- a resume whose hook would move the tracker run (another experiment) is one line, exit 2, before training;
- names MLflow does not take are logged under a name it does, and a SQLite store keeps files beside itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON
from tests.trackers.mlflow_history import histories, run_id
from tests.trackers.sync_command import sync

pytest.importorskip("mlflow", reason="MLflow is not installed (pip install -e '.[test]')")
pytestmark = pytest.mark.slow  # real runs

SETTINGS = ["data.batch_size=64", "train.log_every=5", "model.args.backbone_args={widths: [8, 16]}"]


def hook(db: Path, *more: str) -> str:
    return "hooks=[{" + ", ".join(("name: mlflow", f"tracking_uri: 'sqlite:///{db}'", *more)) + "}]"


def launch(out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [PYTHON, "main.py", f"experiment.output_root={out}", "experiment.name=run", *SETTINGS, *extra]
    return subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=240)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """One epoch logged to a SQLite store: (the store, the run folder)."""
    root = tmp_path_factory.mktemp("copied")
    db = root / "mlflow.db"
    done = launch(root / "out", "train.epochs=1", hook(db))
    assert done.returncode == 0, done.stderr[-3000:]
    return db, root / "out" / "run" / "run_001"


@pytest.mark.timeout(400)
def test_a_copied_run_folder_resumed_gets_a_tracker_run_of_its_own(trained, tmp_path):
    db, original = trained
    before = histories(f"sqlite:///{db}", run_id(original))
    copy = original.parent / "run_002"
    shutil.copytree(original, copy, symlinks=True)
    refused = sync(copy)  # its records are the original's tracker run's
    assert refused.returncode == 2 and "this folder is a copy" in refused.stderr, refused.stderr

    done = launch(original.parents[1], "--resume", str(copy), "train.epochs=2", hook(db))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "this one is a copy" in done.stderr
    mine, theirs = run_id(copy), run_id(original)
    assert mine != theirs
    assert histories(f"sqlite:///{db}", theirs) == before  # nothing of the copy's second epoch in the original's
    got = histories(f"sqlite:///{db}", mine)
    assert max(step for step, _ in got["val/top1"]) > max(step for step, _ in before["val/top1"])

    from mlflow.tracking import MlflowClient

    tags = MlflowClient(f"sqlite:///{db}").get_run(mine).data.tags
    made = json.loads((original / "trackers" / "mlflow.json").read_text())
    assert tags["regtrain.resumed_from_folder_id"] == made["folder_id"] != tags["regtrain.folder_id"]
    assert tags.get("regtrain.resumed_from", theirs) == theirs  # once the checkpoint was written after it existed
    assert tags["regtrain.run_folder"] == str(copy.resolve())
    aside = list((copy / "trackers").glob("copied-*/mlflow.json"))
    assert len(aside) == 1 and json.loads(aside[0].read_text())["run_id"] == theirs
    assert made["folder"] == str(original.resolve())


@pytest.mark.timeout(300)
def test_a_resume_that_would_move_the_tracker_run_is_one_line(trained, tmp_path):
    db, original = trained
    copy = tmp_path / "out" / "run" / "run_001"  # a copy in its own place: the original stays for the other test
    shutil.copytree(original, copy, symlinks=True)
    identity = copy / "trackers" / "mlflow.json"
    made = json.loads(identity.read_text())
    identity.write_text(json.dumps({**made, "folder": str(copy.resolve())}))  # as if made here

    done = launch(tmp_path / "out", "--resume", str(copy), "train.epochs=2", hook(db, "experiment: another"))
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "experiment='run'" in errors[0] and "experiment='another'" in errors[0], errors
    assert "Traceback" not in done.stderr


def test_names_mlflow_refuses_are_logged_renamed_and_files_stay_beside_the_store(tmp_path, monkeypatch, caplog):
    from mlflow.tracking import MlflowClient

    from utils.trackers.mlflow_backend import MlflowBackend
    from utils.trackers.sender import Sender
    from utils.trackers.spool import Spool

    monkeypatch.chdir(tmp_path)  # MLflow's default place for files: ./mlruns
    run = tmp_path / "out" / "run_001"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_bytes(b"weights")
    spool = Spool(run / "trackers", "mlflow")
    spool.save_identity(folder_id="f" * 32)
    uri = f"sqlite:///{tmp_path / 'db' / 'mlflow.db'}"
    (tmp_path / "db").mkdir()
    for record in (
        {"step": 1, "metrics": {"val/mAP@0.5": 0.5, "val/loss": 1.0}},
        {"step": 2, "metrics": {"val/mAP@0.5": 0.6}},
        {"artifact": str(run / "checkpoints" / "best.pt")},
    ):
        spool.append(record)
    sender = Sender(spool, MlflowBackend(uri, "names", "run_001"))
    assert sender.send_waiting() == 3
    client = MlflowClient(uri)
    got = client.get_run(spool.identity["run_id"]).data.metrics
    assert got == {"val/mAP_0.5": 0.6, "val/loss": 1.0}
    assert sum("'val/mAP@0.5' is no MLflow name" in r.getMessage() for r in caplog.records) == 1
    assert not (tmp_path / "mlruns").exists()
    assert list((tmp_path / "db" / "mlartifacts").rglob("best.pt"))


@pytest.mark.timeout(300)
def test_a_moved_run_resumed_through_latest_keeps_its_tracker_run(trained, tmp_path):
    db, original = trained  # the last test of the file: this one logs to the original's MLflow run
    made_at = tmp_path / "first" / "run_001"
    shutil.copytree(original, made_at, symlinks=True)
    identity = made_at / "trackers" / "mlflow.json"
    identity.write_text(json.dumps({**json.loads(identity.read_text()), "folder": str(made_at.resolve())}))
    moved = tmp_path / "out" / "run" / "run_001"
    moved.parent.mkdir(parents=True)
    shutil.move(made_at, moved)  # the folder it was made in is gone: moved, not copied
    (moved.parent / "latest").symlink_to("run_001")
    before = histories(f"sqlite:///{db}", run_id(original))

    done = launch(tmp_path / "out", "--resume", str(moved.parent / "latest"), "train.epochs=2", hook(db))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "was moved from" in done.stderr and "is a copy" not in done.stderr
    assert run_id(moved) == run_id(original)  # the same tracker run, continued
    assert json.loads((moved / "trackers" / "mlflow.json").read_text())["folder"] == str(moved.resolve())
    got = histories(f"sqlite:///{db}", run_id(moved))
    assert max(step for step, _ in got["val/top1"]) > max(step for step, _ in before["val/top1"])
    assert all(len({step for step, _ in steps}) == len(steps) for steps in got.values())  # each step once
