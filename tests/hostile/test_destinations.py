"""Destinations come from the user, never from a file: a handed run folder's tracker files name a store, a run and a
W&B folder, and ``python -m utils.trackers sync`` and ``--mode compare --to-tracker`` only compare them with what the
user names (``MLFLOW_TRACKING_URI``, ``WANDB_DIR``). A store only a file names gets no request (and so none of the
user's credentials, ``MLFLOW_TRACKING_TOKEN``); an MLflow run that is not the folder's gets nothing written; another
run's W&B folder stays as it was. Each refusal is one ``error:`` line naming both and the fix."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Dict, Optional

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON
from tests.hostile.tracker_hosts import mlflow_server, other_host  # noqa: F401 (fixtures)
from tests.trackers.identities import MLFLOW
from utils.errors import ConfigError

pytest.importorskip("mlflow", reason="MLflow is not installed (pip install -e '.[test]')")

TOKEN = "tok-of-the-user-0451"
WAITING = '{"t": 1, "step": 0, "metrics": {"train/loss": 1.5}}\n{"t": 1, "params": {"optim.lr": 0.1}}\n'


def handed(root: Path, name: str, identity: Dict, backend: str = "mlflow") -> Path:
    """A run folder as someone hands it: its tracker's identity and records waiting to be sent."""
    trackers = root / name / "trackers"
    trackers.mkdir(parents=True)
    (trackers / f"{backend}.json").write_text(json.dumps(identity))
    (trackers / f"{backend}.jsonl").write_text(WAITING)
    return root / name


def sync(env: Dict[str, str], *runs: Path, store: Optional[str] = None) -> subprocess.CompletedProcess:
    """``sync RUN ...`` with the user's token in the environment, and the store they name (if any)."""
    env = {**env, "MLFLOW_TRACKING_TOKEN": TOKEN}
    env.pop("MLFLOW_TRACKING_URI", None)
    if store:
        env["MLFLOW_TRACKING_URI"] = store
    cmd = [PYTHON, "-m", "utils.trackers", "sync", *map(str, runs)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def errors(done: subprocess.CompletedProcess) -> Dict[str, str]:
    """The ``error:`` lines of ``done``, by the run folder each names."""
    assert "Traceback" not in done.stderr, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    return {Path(line.split("'")[1]).parent.parent.name: line for line in lines}


@pytest.mark.slow
def test_sync_asks_no_store_that_only_a_file_names(tmp_path, mlflow_server, other_host):  # noqa: F811
    from mlflow.tracking import MlflowClient

    client = MlflowClient(mlflow_server.uri)
    experiment = client.create_experiment("someone_elses")
    victim = client.create_run(experiment, tags={"regtrain.folder_id": "theirs"}).info.run_id
    elsewhere = tmp_path / "elsewhere" / "mlflow.db"
    runs = {
        "other_host": {**MLFLOW, "tracking_uri": other_host.uri},
        "other_file": {**MLFLOW, "tracking_uri": f"sqlite:///{elsewhere}"},
        "other_run": {**MLFLOW, "tracking_uri": mlflow_server.uri, "run_id": victim, "experiment_id": experiment},
    }
    folders = [handed(tmp_path, name, identity) for name, identity in runs.items()]

    unnamed = errors(sync(subprocess_env(), folders[0]))  # the user names no store
    assert f"names the MLflow store {other_host.uri}" in unnamed["other_host"], unnamed
    assert f"MLFLOW_TRACKING_URI={other_host.uri} python -m utils.trackers sync" in unnamed["other_host"]

    done = sync(subprocess_env(), *folders, store=mlflow_server.uri)  # the user names their own
    assert done.returncode == 2, done.stderr
    refused = errors(done)
    assert sorted(refused) == sorted(runs), done.stderr
    for name in ("other_host", "other_file"):
        assert f"and MLFLOW_TRACKING_URI names {mlflow_server.uri}" in refused[name], refused[name]
    assert f"names MLflow run {victim}, which is not this folder's" in refused["other_run"], refused["other_run"]

    assert other_host.requests == []  # no request, so no token, reached the host a file named
    assert not elsewhere.parent.exists()
    held = client.get_run(victim).data
    assert held.metrics == {} and held.params == {}  # nothing written into a run that is not the folder's
    assert all((folder / "trackers" / "mlflow.jsonl").read_text() == WAITING for folder in folders)  # nothing lost


@pytest.mark.slow
def test_sync_leaves_another_runs_wandb_folder_alone(tmp_path):
    pytest.importorskip("wandb", reason="W&B is not installed")
    theirs = tmp_path / "theirs" / "trackers"
    unsynced = theirs / "wandb" / "offline-run-20260101_000000-abc123"
    unsynced.mkdir(parents=True)
    (unsynced / "run-abc123.wandb").write_bytes(b"their records")
    identity = {
        "folder_id": "f1",
        "backend": "wandb",
        "run_id": "abc123",
        "settings": {"mode": "offline", "dir": str(theirs), "project": "p"},
        "sent": 0,
    }
    mine = handed(tmp_path, "mine", identity, "wandb")
    env = {**subprocess_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.pop("WANDB_DIR", None)
    done = sync(env, mine)
    assert done.returncode == 2, done.stderr
    (line,) = errors(done).values()
    assert f"names {theirs} for its W&B files, outside the run folder {mine}" in line and "WANDB_DIR=" in line
    assert (unsynced / "run-abc123.wandb").read_bytes() == b"their records"
    assert sorted(p.name for p in (theirs / "wandb").iterdir()) == [unsynced.name]


def test_compare_to_tracker_names_no_server_the_runs_do_not_share_with_the_user(tmp_path, monkeypatch):
    from utils.trackers.compare_upload import shared_parent

    runs = [
        handed(tmp_path, f"run_00{n}", {**MLFLOW, "tracking_uri": "http://10.9.8.7:5000", "parent_run_id": "p"})
        for n in (1, 2)
    ]
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(
        ConfigError, match=r"names the MLflow store http://10\.9\.8\.7:5000, and .* sends only to a store you name"
    ):
        shared_parent(runs)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    with pytest.raises(ConfigError, match=r"and MLFLOW_TRACKING_URI names http://127\.0\.0\.1:5000"):
        shared_parent(runs)


@pytest.mark.slow
def test_compare_to_tracker_writes_to_no_parent_its_runs_are_not_children_of(
    tmp_path,
    monkeypatch,
    mlflow_server,  # noqa: F811
):
    from mlflow.tracking import MlflowClient

    from utils.trackers.compare_upload import upload

    client = MlflowClient(mlflow_server.uri)
    experiment = client.create_experiment("a_sweep_of_someone")
    parent = client.create_run(experiment, tags={"regtrain.role": "parent"}).info.run_id
    stranger = client.create_run(experiment, tags={"regtrain.folder_id": "f9"}).info.run_id  # not the parent's child
    identity = {**MLFLOW, "tracking_uri": mlflow_server.uri, "parent_run_id": parent, "run_id": stranger}
    runs = [handed(tmp_path, f"run_00{n}", {**identity, "folder_id": "f9"}) for n in (1, 2)]
    folder = tmp_path / "compare"
    folder.mkdir()
    (folder / "compare.md").write_text("a table")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    with pytest.raises(
        ConfigError, match=f"names MLflow run {stranger}, which is not that folder's child of run {parent}"
    ):
        upload(runs, folder)
    assert client.list_artifacts(parent) == [] and "regtrain.compare" not in client.get_run(parent).data.tags


@pytest.mark.slow
def test_a_sweep_parent_file_naming_another_run_nests_nothing_under_it(tmp_path, mlflow_server):  # noqa: F811
    from mlflow.tracking import MlflowClient

    from utils.trackers.sweep_parent import KEY_TAG, parent_file, parent_run

    client = MlflowClient(mlflow_server.uri)
    experiment = client.create_experiment("handed_sweep")
    stranger = client.create_run(experiment).info.run_id
    file = parent_file(tmp_path / "exp", "0123456789ab")
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps({"run_id": stranger, "experiment_id": experiment, "study": "s"}))
    made = parent_run(client, experiment, "s", "0123456789ab", file)
    assert made != stranger and client.get_run(made).data.tags[KEY_TAG] == "0123456789ab"
    assert json.loads(file.read_text())["run_id"] == made


def test_a_killed_processs_wandb_folder_is_removed_only_where_no_link_leads(tmp_path):
    from utils.trackers.wandb_backend import WandbBackend

    theirs = tmp_path / "theirs" / "wandb" / "offline-run-20260101_000000-abc123"
    theirs.mkdir(parents=True)
    linked, through = tmp_path / "mine" / "trackers", tmp_path / "mine2" / "trackers"
    (linked / "wandb").mkdir(parents=True)
    (linked / "wandb" / theirs.name).symlink_to(theirs)  # the killed process's folder: a link to another run's
    through.mkdir(parents=True)
    (through / "wandb").symlink_to(theirs.parent)  # the W&B folder itself a link
    own = tmp_path / "mine3" / "trackers" / "wandb" / theirs.name
    own.mkdir(parents=True)
    for folder in (linked, through, own.parent.parent):
        WandbBackend._drop_unfinished(folder, "abc123", [])
    assert theirs.is_dir() and (linked / "wandb" / theirs.name).is_symlink()
    assert not own.exists()  # its own unfinished folder goes: its records are sent again
