"""MLflow as a run's tracker, against a real ``mlflow server`` (SQLite store, loopback) reached through a relay the
tests take down and bring back (``tests/fixtures/mlflow_server.py``):

- a 2-rank run killed with kill -9 after a mid-epoch checkpoint, resumed on 1 rank while the server is unreachable,
  then ``python -m utils.trackers sync``: one MLflow run whose every metric has the uninterrupted run's steps,
  each once, and its values (bit for bit up to the checkpoint; to float tolerance after it, where 1 rank sums
  what 2 did; the training loss is rank 0's share of the batch, which 1 rank's is not);
- a sweep of 2 configurations x 2 seeds: one parent run with 4 children, tagged with their parameters and seed;
- a tracker that goes away while records are sent keeps them and sends them when it is back, saying both once.
"""

from __future__ import annotations

import logging
import subprocess
import time
from pathlib import Path
from typing import Dict

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON, RECORDED_DIGITS, torchrun
from tests.fixtures.mlflow_server import MlflowServer, Relay, mlflow_command
from tests.sweep.sweeps import command, run, sweep_file
from tests.trackers.mlflow_history import histories, run_id
from tests.trackers.sync_command import sync

pytestmark = pytest.mark.slow  # a server and real runs

GLOBAL, EVERY, KILL_BATCH = 24, 10, 35  # killed reading batch 35 of 59: the newest checkpoint is at step 30
SETTINGS = [
    *RECORDED_DIGITS,
    f"data.global_batch_size={GLOBAL}",
    "train.epochs=1",
    f"train.checkpoint_every_steps={EVERY}",
    "train.log_every=5",
]
WALL_CLOCK = ("train_epoch/samples_per_s",)  # differs by nature; logged once a step all the same
# rank 0's own share of the batch (as in TensorBoard): after a resume on another world size, its share of the new one
RANK0 = ("train/loss", "train_epoch/loss")
TIMEOUT = 240


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if mlflow_command() is None:
        pytest.skip("the mlflow server is not installed (pip install -e '.[test]')")
    with MlflowServer(tmp_path_factory.mktemp("mlflow")) as started:
        yield started


@pytest.fixture()
def relay(server):
    started = Relay(server.port).start()
    yield started
    started.down()


def hook(uri: str) -> str:
    return f"hooks=[{{name: mlflow, tracking_uri: '{uri}', flush_timeout: 10}}]"


def launch(nproc: int, out: Path, uri: str, *extra: str, kill_at: int = 0) -> subprocess.CompletedProcess:
    args = [f"experiment.output_root={out}", "experiment.name=run", *SETTINGS, hook(uri), *extra]
    cmd = torchrun(nproc, *args) if nproc > 1 else [PYTHON, "main.py", *args]
    env = subprocess_env()
    env.pop("TORCHELASTIC_ERROR_FILE", None)
    env.update({"REGTRAIN_RECORD": str(out / "record"), "REGTRAIN_KILL_AT": str(kill_at)})
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=TIMEOUT, start_new_session=True
    )


def assert_same_history(got: Dict, reference: Dict, exact_until: int) -> None:
    assert sorted(got) == sorted(reference)
    for key, expected in reference.items():
        steps = [step for step, _ in got[key]]
        assert steps == [step for step, _ in expected], key  # the same steps, in order
        assert len(set(steps)) == len(steps), key  # each once
        for (step, value), (_, want) in zip(got[key], expected):
            if key in WALL_CLOCK or (key in RANK0 and step > exact_until):
                continue
            if step <= exact_until:
                assert value == want, (key, step)
            else:
                assert value == pytest.approx(want, rel=1e-4, abs=1e-6), (key, step)


@pytest.mark.timeout(600)
def test_a_killed_two_rank_run_resumed_on_one_rank_through_an_outage_has_the_uninterrupted_history(
    tmp_path, server, relay
):
    reference = launch(2, tmp_path / "ref", relay.uri)
    assert reference.returncode == 0, reference.stderr[-3000:]
    killed = launch(2, tmp_path / "killed", relay.uri, kill_at=KILL_BATCH * GLOBAL // 2 + 1)
    assert killed.returncode != 0, killed.stderr[-3000:]

    relay.down()  # the tracker is unreachable for the whole resumed run
    resumed = launch(1, tmp_path / "killed", relay.uri, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "training state restored: epoch 0, step 30" in resumed.stderr
    assert "record(s) wait in" in resumed.stderr and "python -m utils.trackers sync" in resumed.stderr
    run = tmp_path / "killed" / "run" / "latest"
    refused = sync(run, relay.uri)
    assert refused.returncode == 2 and refused.stderr.startswith("error: tracker mlflow: cannot reach"), refused.stderr

    relay.up()
    synced = sync(run, relay.uri)
    assert synced.returncode == 0, synced.stderr
    again = sync(run, relay.uri)
    assert again.returncode == 0 and ": 0 record(s) sent" in again.stdout, again.stdout + again.stderr

    from mlflow.tracking import MlflowClient

    client = MlflowClient(server.uri)
    mine = client.get_run(run_id(run))
    assert mine.info.status == "FINISHED"
    folder_id = mine.data.tags["regtrain.folder_id"]
    found = client.search_runs([mine.info.experiment_id], f"tags.`regtrain.folder_id` = '{folder_id}'")
    assert len(found) == 1  # one tracker run for the run folder, through the kill and the resume
    test_line = next(line for line in resumed.stdout.splitlines() if line.startswith("test: "))
    assert mine.data.tags["regtrain.test"] == test_line
    assert mine.data.tags["regtrain.run_folder"] == str(run.resolve())
    assert Path(mine.data.tags["regtrain.best_checkpoint"]).name == "best.pt"
    assert mine.data.params["train.epochs"] == "1" and mine.data.params["data.global_batch_size"] == str(GLOBAL)
    # a checkpoint resumed into another folder is a tracker run of its own, naming the one it came from
    checkpoint = sorted((run / "checkpoints").glob("epoch*.pt"))[-1]
    elsewhere = launch(1, tmp_path / "elsewhere", relay.uri, "--resume", str(checkpoint), "train.epochs=2")
    assert elsewhere.returncode == 0, elsewhere.stderr[-3000:]
    other = client.get_run(run_id(tmp_path / "elsewhere" / "run" / "latest"))
    assert other.info.run_id != mine.info.run_id
    assert other.data.tags["regtrain.resumed_from_folder_id"] == folder_id  # and resumed_from, once the run existed

    uninterrupted = histories(server.uri, run_id(tmp_path / "ref" / "run" / "latest"))
    assert {"train/loss", "train/lr", "val/top1", "test/top1", "train_epoch/loss"} <= set(uninterrupted)
    assert_same_history(histories(server.uri, run_id(run)), uninterrupted, exact_until=KILL_BATCH // EVERY * EVERY)


@pytest.mark.timeout(600)
def test_a_sweep_is_one_parent_run_with_a_child_per_configuration_and_seed(tmp_path, server):
    spec = {"space": {"optim.lr": {"grid": [0.01, 0.03]}}, "seeds": [0, 1], "parallel": 2}
    cmd = command(sweep_file(tmp_path, "lr", spec), tmp_path / "out", "train.epochs=1", hook(server.uri))
    done = run(cmd)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    from mlflow.tracking import MlflowClient

    client = MlflowClient(server.uri)
    experiment = client.get_experiment_by_name("digits_small_cnn")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.`regtrain.role` = 'parent'")
    children = client.search_runs([experiment.experiment_id], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    tagged = sorted((c.data.tags["sweep.param.optim.lr"], c.data.tags["sweep.seed"]) for c in children)
    assert tagged == [("0.01", "0"), ("0.01", "1"), ("0.03", "0"), ("0.03", "1")]
    assert all(c.info.status == "FINISHED" and "test/top1" in c.data.metrics for c in children)

    experiment_folder = tmp_path / "out" / "digits_small_cnn"
    compared = subprocess.run(
        [PYTHON, "main.py", "--mode", "compare", str(experiment_folder), "--to-tracker"],
        cwd=ROOT,
        env={**subprocess_env(), "MLFLOW_TRACKING_URI": server.uri},  # the user names the server
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert compared.returncode == 0, compared.stderr[-3000:]
    uploaded = sorted(item.path for item in client.list_artifacts(parent.info.run_id, "compare"))
    assert uploaded == ["compare/compare.csv", "compare/compare.md", "compare/compare.png"]
    folder = Path(client.get_run(parent.info.run_id).data.tags["regtrain.compare"])
    downloaded = client.download_artifacts(parent.info.run_id, "compare/compare.md", str(tmp_path))
    assert Path(downloaded).read_text() == (folder / "compare.md").read_text()


def test_records_sent_while_the_tracker_is_away_wait_and_go_when_it_is_back(tmp_path, relay, caplog):
    from utils.trackers.mlflow_backend import MlflowBackend
    from utils.trackers.sender import Sender
    from utils.trackers.spool import Spool

    spool = Spool(tmp_path / "trackers", "mlflow")
    spool.save_identity(folder_id="outage-test")
    sender = Sender(spool, MlflowBackend(relay.uri, "outage", "outage/run_001"), interval=0.05).start()
    caplog.set_level(logging.WARNING, logger="utils.trackers.sender")

    def wait(condition) -> None:
        deadline = time.monotonic() + 30
        while not condition():
            assert time.monotonic() < deadline
            time.sleep(0.02)

    spool.append({"step": 1, "metrics": {"train/loss": 2.0}})
    wait(lambda: spool.waiting() == 0)
    relay.down()
    for step in range(2, 12):
        spool.append({"step": step, "metrics": {"train/loss": 1.0 / step}})
    wait(lambda: "cannot reach" in caplog.text)
    assert spool.waiting() == 10  # kept, not dropped
    relay.up()
    wait(lambda: spool.waiting() == 0)
    wait(lambda: "takes records again" in caplog.text)
    assert sender.close(5, tmp_path) == 0
    assert caplog.text.count("cannot reach") == 1 and caplog.text.count("takes records again") == 1
    history = histories(relay.uri, spool.identity["run_id"])
    assert history == {"train/loss": [(1, 2.0)] + [(step, 1.0 / step) for step in range(2, 12)]}
