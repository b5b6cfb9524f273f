"""Secrets are a type, not a string: a run logging to ``http://alice:PW@HOST`` (a real MLflow server, which takes the
password as HTTP basic authentication) leaves the password in no file of its run folder (log, config.yaml, every
checkpoint, TensorBoard's events, the trackers' identity and spool), in no line it prints and in no MLflow param:
each holds ``alice:***@``. A resume of it takes the password again from ``MLFLOW_TRACKING_URI``, as one line says."""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterator, Tuple

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.hostile.tracker_hosts import mlflow_server  # noqa: F401 (a fixture)
from tests.trackers.mlflow_history import run_id
from utils.errors import ConfigError, one_line
from utils.secret_text import Secret, hide, hide_all, is_masked, masked, unmasked

PASSWORD = "pW-9f3e1c"
SETTINGS = ["train.epochs=1", "data.batch_size=64", "train.log_every=5", "model.args.backbone_args={widths: [8, 16]}"]
TIMEOUT = 240


def env(**more: str) -> Dict[str, str]:
    made = subprocess_env()
    for key in ("MLFLOW_TRACKING_URI", "TORCHELASTIC_ERROR_FILE"):
        made.pop(key, None)
    return {**made, **more}


def holding(folder: Path, text: str) -> list:
    """The files under ``folder`` whose bytes hold ``text`` (checkpoints and TensorBoard's events among them)."""
    return [path for path in folder.rglob("*") if path.is_file() and text.encode() in path.read_bytes()]


@pytest.fixture(scope="module")
def trained(main_server, mlflow_server, tmp_path_factory) -> Iterator[Tuple[Path, str, object]]:  # noqa: F811
    """One epoch logged to the server through a URI with a password: (run folder, that URI, the finished process)."""
    out = tmp_path_factory.mktemp("secrets")
    uri = mlflow_server.uri.replace("http://", f"http://alice:{PASSWORD}@")
    hook = f"hooks=[{{name: mlflow, tracking_uri: '{uri}', flush_timeout: 20}}]"
    args = [f"experiment.output_root={out}", "experiment.name=sec", *SETTINGS, hook]
    done = main_server.run(args, ROOT, env(), TIMEOUT)
    assert done.returncode == 0, done.stderr[-3000:]
    yield out / "sec" / "run_001", uri, done


@pytest.mark.slow
def test_a_password_in_a_tracking_uri_is_in_no_file_line_or_param(trained, mlflow_server):  # noqa: F811
    from mlflow.tracking import MlflowClient

    run, uri, done = trained
    assert PASSWORD not in done.stdout + done.stderr
    assert holding(run, PASSWORD) == []
    assert (run / "config.yaml").read_text().count("alice:***@") == 1
    assert any(path.name.startswith("events.out.tfevents") for path in holding(run, "alice:***@"))
    assert {"trackers/mlflow.json", "trackers/mlflow.jsonl"} <= {str(p.relative_to(run)) for p in holding(run, "***")}
    held = MlflowClient(mlflow_server.uri).get_run(run_id(run)).data
    assert "train/loss" in held.metrics  # sent through the URI with its password
    assert not [key for key, value in held.params.items() if PASSWORD in value]
    assert "alice:***@" in held.params["hooks"]


@pytest.mark.slow
def test_a_resume_takes_the_password_again_from_the_environment(trained, main_server, mlflow_server):  # noqa: F811
    from mlflow.tracking import MlflowClient

    run, uri, _ = trained
    again = ["--config", str(run / "config.yaml"), "--resume", str(run), "train.epochs=2"]
    refused = main_server.run(again, ROOT, env(), TIMEOUT)  # config.yaml holds the password masked
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    (line,) = [line for line in refused.stderr.splitlines() if line.startswith("error: ")]
    assert "holds a password or token the run folder keeps masked" in line and "MLFLOW_TRACKING_URI=" in line, line

    resumed = main_server.run(again, ROOT, env(MLFLOW_TRACKING_URI=uri), TIMEOUT)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "training state restored: epoch 1" in resumed.stderr
    assert PASSWORD not in resumed.stdout + resumed.stderr and holding(run, PASSWORD) == []
    client = MlflowClient(mlflow_server.uri)
    steps = [m.step for m in client.get_metric_history(run_id(run), "train_epoch/loss")]
    assert len(steps) == 2  # both epochs in the one tracker run, the second sent with the password given again


def test_a_secret_shows_masked_wherever_it_is_turned_into_text():
    import copy
    import json
    import pickle

    import yaml

    secret = hide("postgresql://bob:hunter2@db:5432/optuna?sslmode=require&password=also")
    assert isinstance(secret, Secret) and secret.reveal().endswith("password=also")
    shown = "postgresql://bob:***@db:5432/optuna?sslmode=require&password=***"
    assert str(secret) == f"{secret}" == secret == json.loads(json.dumps(secret)) == shown
    assert yaml.safe_load(yaml.safe_dump({"storage": [secret]})) == {"storage": [shown]}
    assert pickle.loads(pickle.dumps(secret)) == shown and b"hunter2" not in pickle.dumps(secret)
    assert type(copy.deepcopy(secret)) is str  # what dataclasses.asdict keeps: the masked text
    assert "hunter2" not in repr({"k": secret}) and "hunter2" not in secret.upper()
    tree = hide_all({"hooks": [{"tracking_uri": "https://u:p@h"}], "lr": 0.1, "name": "x"})
    assert isinstance(tree["hooks"][0]["tracking_uri"], Secret) and tree["name"] == "x"
    assert masked("http://h:5000/a@b") == "http://h:5000/a@b"  # a port and a path are no password
    # an '@' left unencoded in a password is the password's (urllib sends 'p@ss'): none of it shows
    assert (
        masked("error: postgresql://bob:p@ss@db:5432/x, http://a:q@h")
        == "error: postgresql://bob:***@db:5432/x, http://a:***@h"
    )
    assert is_masked("http://a:***@h") and not is_masked("http://a:b@h")
    assert unmasked("http://a:***@h", "http://a:b@h").reveal() == "http://a:b@h"
    assert unmasked("http://a:***@h", "http://a:b@other") is None and unmasked("http://h", None) == "http://h"
    assert one_line(ConfigError("cannot reach http://u:pw@h")) == "cannot reach http://u:***@h"  # the error: line


def test_a_sweeps_database_password_is_a_secret(tmp_path):
    from utils.sweep.spec import load_spec

    sweep = tmp_path / "lr.yaml"
    sweep.write_text("space: {optim.lr: {grid: [0.1]}}\nstorage: postgresql://bob:hunter2@127.0.0.1:9/optuna\n")
    storage = load_spec(str(sweep)).storage
    assert storage == "postgresql://bob:***@127.0.0.1:9/optuna" and storage.reveal().endswith(
        ":hunter2@127.0.0.1:9/optuna"
    )


def test_sync_takes_the_password_of_a_masked_identity_from_the_environment(tmp_path, monkeypatch):
    from utils.trackers.destinations import named_store

    identity = {"tracking_uri": "http://alice:***@127.0.0.1:5000"}  # as a run folder keeps it
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://alice:pw@127.0.0.1:5000")
    assert named_store(identity, tmp_path / "mlflow.json", "sync").reveal() == "http://alice:pw@127.0.0.1:5000"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mallory:pw@127.0.0.1:5000")  # another user is another store
    with pytest.raises(ConfigError, match=r"and MLFLOW_TRACKING_URI names http://mallory:\*\*\*@127\.0\.0\.1:5000"):
        named_store(identity, tmp_path / "mlflow.json", "sync")
