"""A spool's files read back as data: a line that is no record of the schema is skipped and counted (an upload only of
a file inside the run folder), and an identity whose fields are not what the framework wrote is one line naming the
file and the way out, at opening (a ``--resume``, ``sync``, ``--mode compare --to-tracker``), never a traceback."""

from __future__ import annotations

import json
import logging
import os
import re

import pytest

from tests.trackers.identities import MLFLOW
from utils.errors import OutputError, UserError
from utils.trackers.compare_upload import shared_parent
from utils.trackers.spool import Spool

ONE_LINE = (
    r"cannot read the tracker's identity '.*mlflow\.json' \(.*\); restore it from a copy or remove the run's trackers/"
)


def test_lines_that_are_no_record_are_skipped_counted_and_never_sent(tmp_path, caplog, monkeypatch):
    run = tmp_path / "exp" / "run_001"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.pt").write_bytes(b"weights")
    os.symlink("/etc/hostname", run / "checkpoints" / "away.pt")
    monkeypatch.chdir(tmp_path)  # a run started here names its files from here
    good = [
        {"t": 1, "params": {"optim.lr": 0.1, "model.name": "resnet", "seed": None, "amp": True}},
        {"t": 2, "step": 0, "metrics": {"train/loss": 2.5, "train/lr": 1}},
        {"t": 3, "step": 5, "metrics": {"train/loss": float("nan")}},  # a diverged loss is a value
        {"t": 4, "tags": {"regtrain.best_checkpoint": str(run / "checkpoints" / "best.pt"), "sweep.seed": None}},
        {"t": 5, "artifact": str(run / "checkpoints" / "best.pt")},
        {"t": 6, "artifact": "exp/run_001/checkpoints/best.pt"},
        {"t": 7, "status": "FINISHED"},
    ]
    bad = [
        {"t": 8, "metrics": {"train/loss": 1.0}},  # no step: a KeyError at opening before
        {"t": 9, "step": "10", "metrics": {"train/loss": 1.0}},  # a TypeError at opening before
        {"t": 10, "step": -1, "metrics": {"train/loss": 1.0}},
        {"t": 11, "step": True, "metrics": {"train/loss": 1.0}},
        {"t": 12, "step": 10, "metrics": {"train/loss": "1.0"}},
        {"t": 13, "step": 10, "metrics": [1.0]},
        {"step": 10, "metrics": {"train/loss": 1.0}},  # no time: MLflow's metric needs one
        {"t": 14, "step": 10, "metrics": {"train/loss": 1.0}, "params": {}},
        {"t": 15, "params": {"optim.lr": [0.1]}},
        {"t": 16, "tags": "x"},
        {"t": 17, "status": "DONE"},
        {"t": 18, "artifact": "/etc/hostname"},  # uploaded before
        {"t": 19, "artifact": str(run / ".." / "run_002" / "best.pt")},
        {"t": 20, "artifact": str(run / "checkpoints" / "away.pt")},  # a link leading out
        {"t": 21, "artifact": str(run)},
        {"t": "22", "status": "RUNNING"},
    ]
    (run / "trackers").mkdir()
    records = run / "trackers" / "mlflow.jsonl"
    records.write_text("".join(json.dumps(record) + "\n" for record in [*bad[:8], *good, *bad[8:]]))
    with caplog.at_level(logging.WARNING):
        spool = Spool(run / "trackers", "mlflow")  # what a --resume and sync open first
    said = [r.getMessage() for r in caplog.records if "no record" in r.getMessage()]
    assert said == [f"tracker mlflow: {len(bad)} line(s) of {records} are no record; they are skipped"]
    assert spool.last_step == {"train/loss": 5, "train/lr": 0} and spool.status == "FINISHED"
    assert spool.params == good[0]["params"]
    sent, end = spool.pending(0)
    # an artifact named from where the run started comes with its whole path (where a sender finds it from anywhere)
    whole = [{**r, "artifact": str(tmp_path / r["artifact"])} if r["t"] == 6 else r for r in good]
    assert json.dumps(sent) == json.dumps(whole) and end == records.stat().st_size  # NaN compared as written
    assert spool.waiting() == len(good)


@pytest.mark.parametrize(
    "change, why",
    [
        ({"sent": "abc"}, r"has sent=\"abc\", which is not a byte offset"),
        ({"sent": -3}, "has sent=-3"),
        ({"sent": True}, "has sent=true"),
        ({"run_id": "x' OR tags.a = 'b"}, "has run_id=.*, which is not an id"),
        ({"folder_id": "*"}, "has folder_id"),
        ({"experiment_id": 1}, "has experiment_id"),
        ({"parent_run_id": "p/../q"}, "has parent_run_id"),
        ({"tracking_uri": 5}, "has tracking_uri=5, which is not a string"),
        ({"run_name": None}, "has run_name=null"),
        ({"parent": {"study": 3, "file": "x"}}, "has a 'parent' that is not a sweep's"),
        ({"parent": "s"}, "has a 'parent'"),
        ({"backend": "wandb"}, "names backend 'wandb', not the 'mlflow' its name says"),
        ({"tracking_uri": None}, "has tracking_uri=null"),
    ],
)
def test_an_identity_field_of_another_type_is_one_line(tmp_path, change, why):
    folder = tmp_path / "exp" / "run_001" / "trackers"
    folder.mkdir(parents=True)
    (folder / "mlflow.json").write_text(json.dumps({**MLFLOW, **change}))
    with pytest.raises(OutputError, match=ONE_LINE) as caught:
        Spool(folder, "mlflow")
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and re.search(why, message), message


@pytest.mark.parametrize(
    "identity, why",
    [
        ({key: value for key, value in MLFLOW.items() if key != "tracking_uri"}, "lacks tracking_uri, which sending"),
        ({"folder_id": "f", "run_id": "r"}, "has run_id but no 'backend'"),
        ([1], "holds no JSON object"),
    ],
)
def test_an_identity_lacking_what_sending_needs_is_one_line(tmp_path, identity, why):
    folder = tmp_path / "run_001" / "trackers"
    folder.mkdir(parents=True)
    (folder / "mlflow.json").write_text(json.dumps(identity))
    with pytest.raises(OutputError, match=f"{ONE_LINE}.*") as caught:
        Spool(folder, "mlflow")
    assert why in str(caught.value)


def test_the_identities_the_framework_writes_are_read_back(tmp_path):
    experiment = tmp_path / "sweep"
    folder = experiment / "run_001" / "trackers"
    folder.mkdir(parents=True)
    parent = {"study": "lr search"}  # its file is found from the run folder (sweep_parent.parent_file)
    mlflow = {**MLFLOW, "parent": parent, "run_id": "9a8b", "experiment_id": "1", "parent_run_id": "77", "sent": 10}
    (folder / "mlflow.json").write_text(json.dumps(mlflow))
    assert Spool(folder, "mlflow").identity == mlflow
    settings = {"project": "p", "dir": str(folder), "name": "sweep/run_001", "group": "lr search", "mode": "offline"}
    wandb = {
        "folder_id": "f",
        "backend": "wandb",
        "settings": settings,
        "run_id": "ab12cd",
        "finished": ["offline-run-1-ab12cd"],
    }
    (folder / "wandb.json").write_text(json.dumps(wandb))
    assert Spool(folder, "wandb").identity == wandb
    for change in ({"settings": {**settings, "id": "other"}}, {"finished": ["../../x"]}, {"settings": None}):
        (folder / "wandb.json").write_text(json.dumps({**wandb, **change}))
        with pytest.raises(OutputError, match=r"cannot read the tracker's identity '.*wandb\.json'"):
            Spool(folder, "wandb")
    (folder / "wandb.json").write_text(json.dumps({"folder_id": "f", "backend": "wandb"}))
    with pytest.raises(OutputError, match="lacks settings, which sending to wandb needs"):
        Spool(folder, "wandb")


@pytest.mark.parametrize(
    "text", ["{cut sh", json.dumps({"parent_run_id": "p"}), json.dumps({**MLFLOW, "parent_run_id": "p"})[:-1]]
)
def test_compare_to_tracker_with_a_corrupt_or_incomplete_identity_is_one_line(tmp_path, text, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", MLFLOW["tracking_uri"])  # the server the user names
    runs = [tmp_path / "exp" / f"run_00{n}" for n in (1, 2)]
    for run in runs:
        (run / "trackers").mkdir(parents=True)
        (run / "trackers" / "mlflow.json").write_text(json.dumps({**MLFLOW, "parent_run_id": "p"}))
    (runs[1] / "trackers" / "mlflow.json").write_text(text)
    with pytest.raises(UserError, match=r"cannot read the tracker's identity '.*run_002/trackers/mlflow\.json'"):
        shared_parent(runs)
    (runs[1] / "trackers" / "mlflow.json").write_text(json.dumps({**MLFLOW, "parent_run_id": "p"}))
    assert shared_parent(runs) == (MLFLOW["tracking_uri"], "p")


def test_an_artifact_of_a_run_folder_reached_through_a_link_is_a_record(tmp_path):
    real = tmp_path / "scratch" / "exp" / "run_001"
    (real / "checkpoints").mkdir(parents=True)
    (real / "checkpoints" / "best.pt").write_bytes(b"weights")
    (tmp_path / "output").symlink_to(tmp_path / "scratch")  # an output root on scratch space, as on clusters
    for run in (tmp_path / "output" / "exp" / "run_001", tmp_path / "output" / "exp" / "latest"):
        if not run.exists():
            run.symlink_to("run_001")
        spool = Spool(run / "trackers", "mlflow")
        spool.append({"artifact": str((run / "checkpoints" / "best.pt").resolve())})  # as the hook writes it
        records, _ = spool.pending(0)
        assert [r.get("artifact") for r in records][-1] == str(real.resolve() / "checkpoints" / "best.pt"), run
        spool.close()
