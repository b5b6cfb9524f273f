"""The spool: what a kill leaves is read back whole, a resumed run's replay is left out, and a tracker named
without its library or its server is one line."""

from __future__ import annotations

import json

import pytest

from utils.errors import ConfigError
from utils.trackers.extras import require
from utils.trackers.hooks import MlflowTracker
from utils.trackers.spool import Spool


def test_a_record_cut_by_a_kill_is_dropped_and_the_rest_read_back(tmp_path):
    spool = Spool(tmp_path, "mlflow")
    spool.append({"params": {"optim.lr": 0.1}})
    spool.append({"step": 5, "metrics": {"train/loss": 2.0, "train/lr": 0.1}})
    spool.append({"step": 10, "metrics": {"train/loss": 1.0}})
    spool.close()
    with open(spool.records_path, "a") as handle:
        handle.write('{"step": 15, "metrics": {"train/lo')  # killed while writing
    again = Spool(tmp_path, "mlflow")
    assert again.params == {"optim.lr": 0.1}
    assert again.last_step == {"train/loss": 10, "train/lr": 5}
    records, end = again.pending(0)
    assert [r.get("step") for r in records] == [None, 5, 10] and end == spool.records_path.stat().st_size
    assert again.waiting() == 3


def test_a_resumed_run_logs_only_what_the_spool_lacks(tmp_path):
    spool = Spool(tmp_path, "mlflow")
    spool.append({"step": 10, "metrics": {"train/loss": 1.0}})
    spool.append({"step": 12, "metrics": {"val/top1": 0.5}})
    # replayed after a checkpoint at step 8: steps 10 and 12 are there, step 14 is new; counts and bools are no metric
    assert spool.new_values(10, {"train/loss": 1.0, "train/lr": 0.1}) == {"train/lr": 0.1}
    assert spool.new_values(12, {"val/top1": 0.5, "val/samples": 180}) == {"val/samples": 180.0}
    assert spool.new_values(14, {"train/loss": 0.5, "flag": True, "name": "x"}) == {"train/loss": 0.5}


def test_the_sent_offset_survives_in_the_identity_written_whole(tmp_path):
    spool = Spool(tmp_path, "mlflow")
    spool.save_identity(folder_id="f", sent=12)
    assert json.loads(spool.identity_path.read_text()) == {"folder_id": "f", "sent": 12}
    assert Spool(tmp_path, "mlflow").sent == 12
    spool.identity_path.write_text("{not json")
    with pytest.raises(Exception, match="cannot read the tracker's identity"):
        Spool(tmp_path, "mlflow")


def test_a_tracker_without_its_library_or_its_server_is_one_line(monkeypatch):
    with pytest.raises(
        ConfigError,
        match=r"^hook 'x' needs the no_such_tracker library, which is not installed: "
        r'pip install -e "\.\[no_such_tracker\]" \(or remove the hook',
    ):
        require("no_such_tracker", "hook 'x'", " (or remove the hook from 'hooks')")
    pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(ConfigError, match="needs a tracking URI.*MLFLOW_TRACKING_URI"):
        MlflowTracker()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")
    assert MlflowTracker().tracking_uri == "http://127.0.0.1:9"


def test_a_spool_replaced_or_holding_garbage_is_read_as_far_as_it_goes(tmp_path):
    spool = Spool(tmp_path, "mlflow")
    spool.append({"step": 1, "metrics": {"a": 1.0}})
    spool.close()
    spool.save_identity(folder_id="f", sent=spool.records_path.stat().st_size)
    spool.records_path.write_text('{"t": 7, "step": 2, "metrics": {"a": 2.0}}\nnot json\n[1]\n')  # replaced by hand
    again = Spool(tmp_path, "mlflow")
    assert again.sent == 0 and again.last_step == {"a": 2}  # its offset pointed past the new file: all goes again
    records, _ = again.pending(0)
    assert records == [{"t": 7, "step": 2, "metrics": {"a": 2.0}}]


def test_a_tracking_uri_or_a_flush_timeout_that_cannot_work_is_one_line(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    for uri in ("garbage", "ftp://host/x", "file:///tmp/mlruns"):  # file: MLflow 3's store in maintenance mode
        with pytest.raises(ConfigError, match="is no MLflow store"):
            MlflowTracker(tracking_uri=uri)
    with pytest.raises(ConfigError, match="flush_timeout must be >= 0"):
        MlflowTracker(tracking_uri="http://127.0.0.1:9", flush_timeout=-5)
    monkeypatch.chdir(tmp_path)
    assert MlflowTracker(tracking_uri="sqlite:///m.db").tracking_uri == f"sqlite:///{tmp_path / 'm.db'}"


def test_wandb_online_without_a_login_is_one_line_before_training(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    from utils.trackers.hooks import WandbTracker

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    with pytest.raises(ConfigError, match="needs a W&B login.*mode: offline"):
        WandbTracker()
    assert WandbTracker(mode="offline").mode == "offline"


def test_the_best_checkpoint_is_found_in_either_layout(tmp_path):
    pytest.importorskip("mlflow")
    hook = MlflowTracker(tracking_uri="http://127.0.0.1:9")
    hook.run_path = tmp_path
    assert hook._best() is None  # none yet
    (tmp_path / "checkpoints" / "best.dcp").mkdir(parents=True)  # dist.mode=fsdp: a folder of shards
    assert hook._best() == tmp_path / "checkpoints" / "best.dcp"
    (tmp_path / "checkpoints" / "best.pt").write_bytes(b"")
    assert hook._best() == tmp_path / "checkpoints" / "best.pt"
