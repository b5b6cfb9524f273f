"""Records others hand over, read as a careful user and an attacker would write them (issue 48, "Records"):

- a user's file named as a sweep's storage is refused in one line and left as it is (only a journal is rewritten);
- a run folder under a trial's tag without its config.yaml (gone, or a link to ``/dev/zero``) is no trial's result:
  the sweep names it and trains the seed anew, compare names it and leaves it out;
- a metric name longer than MLflow's 250 characters is shortened by the documented rule (said once), so its run's
  records go; a moved run folder's pending checkpoint upload is re-rooted, not dropped (a real MLflow server);
- a resume whose ``WANDB_MODE`` would put its W&B run elsewhere (``disabled``: nowhere) is one line;
- ``sync`` of a regular file says it is a file.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT, subprocess_env
from tests.fixtures.dist_utils import PYTHON
from tests.fixtures.metrics_rows import rows
from tests.sweep.sweeps import command, run, runs_by_tag, sweep_file
from tests.trackers.identities import MLFLOW
from tests.trackers.mlflow_history import histories
from tests.trackers.sync_command import sync
from utils.errors import ConfigError


def error_lines(text: str) -> list:
    return [line for line in text.splitlines() if line.startswith("error:")]


# -- a sweep's storage ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [b"remember: lr 0.03 was best", b"notes\nmore notes", b'{"note": "not a record"}', b"\xff\xfe\x00binary"],
)
def test_a_file_that_is_no_journal_is_refused_and_left_as_it_is(tmp_path, content):
    pytest.importorskip("optuna")
    from utils.sweep.study import open_storage

    notes = tmp_path / "notes.txt"
    notes.write_bytes(content)
    with pytest.raises(ConfigError, match=r"study storage '.*notes.txt' is not an Optuna journal: it ends with "):
        open_storage(str(notes))
    assert notes.read_bytes() == content


@pytest.mark.slow
def test_a_sweep_naming_a_users_file_as_storage_is_one_line(tmp_path):
    pytest.importorskip("optuna")
    notes = tmp_path / "notes.txt"
    notes.write_text("remember: lr 0.03 was best")  # one line, no newline
    sweep = sweep_file(tmp_path, "s", {"space": {"optim.lr": {"grid": [0.03]}}, "storage": str(notes)})
    done = run(command(sweep, tmp_path / "out", "train.epochs=1"))
    assert done.returncode == 2, done.stderr[-3000:]
    errors = error_lines(done.stderr)
    assert len(errors) == 1 and "is not an Optuna journal" in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr and "dropped" not in done.stderr
    assert notes.read_text() == "remember: lr 0.03 was best"


# -- runs without their config --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_run_without_its_config_is_no_trial_result_and_compare_names_it(tmp_path):
    pytest.importorskip("optuna")
    out = tmp_path / "out"
    experiment = out / "digits_small_cnn"
    tag = "t000_lr=0.03_seed=0"
    planted = experiment / f"run_001_{tag}"  # a perfect score, and no config that trained it
    planted.mkdir(parents=True)
    (planted / "metrics.jsonl").write_text(
        json.dumps({"split": "val", "epoch": 0, "step": 22, "top1": 1.0})
        + "\n"
        + json.dumps({"split": "test", "epoch": 0, "step": 22, "top1": 1.0, "loss": 0.0})
        + "\n"
    )
    (planted / "config.yaml").symlink_to("/dev/zero")
    sweep = sweep_file(tmp_path, "s", {"space": {"optim.lr": {"grid": [0.03]}}, "seeds": [0]})
    done = run(command(sweep, out, "train.epochs=1"))
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if f"run '{planted}' has this trial's tag but no config" in line]
    assert len(said) == 1, done.stderr[-3000:]
    (planted_again, trained) = runs_by_tag(experiment)[tag]
    assert planted_again == planted and trained.name == f"run_002_{tag}"
    table = list(csv.DictReader((experiment / "sweep_s" / "trials.csv").open()))
    best = max(r["top1"] for r in rows(trained, "val"))
    assert best < 1.0 and float(table[0]["value (top1)"]) == pytest.approx(best, abs=1e-6)
    assert table[0]["runs"].split() == [trained.name]

    (planted / "config.yaml").unlink()  # gone altogether: the same
    compared = compare(experiment, tmp_path / "c1")
    assert compared.returncode == 0, compared.stderr[-3000:]
    left_out = [line for line in compared.stderr.splitlines() if "without their config.yaml" in line]
    assert len(left_out) == 1 and str(planted) in left_out[0], compared.stderr[-3000:]
    assert "compare: runs=1 " in compared.stdout
    alone = compare(planted, tmp_path / "c2")  # the run named alone: nothing to compare, and why
    assert alone.returncode == 2 and "1 run folder(s) there lack their config.yaml" in error_lines(alone.stderr)[0]
    (trained / "config.yaml").unlink()  # the run the sweep's table lists
    listed = compare(experiment / "sweep_s", tmp_path / "c3")
    assert listed.returncode == 2 and "lack their config.yaml" in error_lines(listed.stderr)[0], listed.stderr


def compare(path: Path, output: Path) -> subprocess.CompletedProcess:
    return run([PYTHON, "main.py", "--mode", "compare", str(path), "--output", str(output)])


# -- tracker records ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    pytest.importorskip("mlflow", reason="MLflow is not installed (pip install -e '.[test]')")
    from tests.fixtures.mlflow_server import MlflowServer, mlflow_command

    if mlflow_command() is None:
        pytest.skip("the mlflow server is not installed (pip install -e '.[test]')")
    with MlflowServer(tmp_path_factory.mktemp("mlflow")) as started:
        yield started


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_long_metric_names_and_a_moved_folders_upload_reach_the_server(tmp_path, mlflow_server):
    """Records as a run of an earlier version left them (a whole artifact path in the folder it was made in), sent
    by ``sync`` once the folder was moved: every record goes, the checkpoint too, each long name under its own
    shortened one."""
    from mlflow.tracking import MlflowClient

    from utils.trackers.mlflow_backend import MAX_NAME, mlflow_name

    made = tmp_path / "cluster" / "run_001"
    (made / "checkpoints").mkdir(parents=True)
    (made / "checkpoints" / "best.pt").write_bytes(b"weights")
    long_a, long_b = "val/" + "a" * 300 + "/x", "val/" + "a" * 300 + "/y"  # alike for more than MLflow keeps
    identity = {**MLFLOW, "tracking_uri": mlflow_server.uri, "folder": str(made.resolve())}
    trackers = made / "trackers"
    trackers.mkdir()
    (trackers / "mlflow.json").write_text(json.dumps(identity))
    records = [
        {"t": 1, "step": 1, "metrics": {long_a: 0.5, long_b: 0.25, "val/top1": 0.75}},
        {"t": 2, "step": 2, "metrics": {long_a: 0.6}},
        {"t": 3, "artifact": str((made / "checkpoints" / "best.pt").resolve())},
    ]
    (trackers / "mlflow.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    moved = tmp_path / "home" / "run_001"
    moved.parent.mkdir()
    shutil.move(made, moved)

    done = sync(moved, mlflow_server.uri)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "3 record(s) sent" in done.stdout and "no record" not in done.stderr, done.stderr
    assert sum(f"'{long_a}' is no MLflow name" in line for line in done.stderr.splitlines()) == 1
    short_a, short_b = mlflow_name(long_a), mlflow_name(long_b)
    assert len(short_a) == len(short_b) == MAX_NAME and short_a != short_b
    run_id = json.loads((moved / "trackers" / "mlflow.json").read_text())["run_id"]
    got = histories(mlflow_server.uri, run_id)
    assert got == {short_a: [(1, 0.5), (2, 0.6)], short_b: [(1, 0.25)], "val/top1": [(1, 0.75)]}
    uploaded = [f.path for f in MlflowClient(mlflow_server.uri).list_artifacts(run_id, "checkpoints")]
    assert uploaded == ["checkpoints/best.pt"]
    again = sync(moved, mlflow_server.uri)
    assert again.returncode == 0 and "0 record(s) sent" in again.stdout, again.stderr


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_run_moved_while_its_checkpoint_upload_waits_uploads_it_from_where_it_is(tmp_path, mlflow_server):
    """A run that ended while its server was away keeps ``best.pt``'s upload in its spool (named relative to the
    run folder); moved, then synced once the server is back, it uploads the file from its new place."""
    from mlflow.tracking import MlflowClient

    from tests.fixtures.mlflow_server import Relay

    relay = Relay(mlflow_server.port).start()
    relay.down()  # away for the whole run
    try:
        hook = f"hooks=[{{name: mlflow, tracking_uri: '{relay.uri}', log_checkpoints: true, flush_timeout: 0}}]"
        cmd = [PYTHON, "main.py", f"experiment.output_root={tmp_path / 'out'}", "experiment.name=run", hook]
        cmd += ["model.args.backbone_args={widths: [8, 16]}", "data.batch_size=64", "threads=1", "train.epochs=1"]
        done = subprocess.run(cmd, cwd=ROOT, env=subprocess_env(), capture_output=True, text=True, timeout=240)
        assert done.returncode == 0, done.stderr[-3000:]
        made = tmp_path / "out" / "run" / "run_001"
        spooled = [json.loads(line) for line in (made / "trackers" / "mlflow.jsonl").read_text().splitlines()]
        assert [r["artifact"] for r in spooled if "artifact" in r] == ["checkpoints/best.pt"]
        moved = tmp_path / "elsewhere" / "run_001"
        moved.parent.mkdir()
        shutil.move(made, moved)
        relay.up()
        sent = sync(moved, relay.uri)
        assert sent.returncode == 0, sent.stderr[-3000:]
        assert "was moved from" in sent.stderr and "no record" not in sent.stderr, sent.stderr
        run_id = json.loads((moved / "trackers" / "mlflow.json").read_text())["run_id"]
        uploaded = MlflowClient(mlflow_server.uri).list_artifacts(run_id, "checkpoints")
        assert [(f.path, f.file_size) for f in uploaded] == [
            ("checkpoints/best.pt", (moved / "checkpoints" / "best.pt").stat().st_size)
        ]
    finally:
        relay.down()


def test_sync_of_a_regular_file_says_it_is_a_file(tmp_path, capsys):
    from utils.trackers.__main__ import main

    note = tmp_path / "run_001.txt"
    note.write_text("not a run")
    assert main(["sync", str(note)]) == 2
    errors = error_lines(capsys.readouterr().err)
    assert errors == [f"error: '{note}' is a file, not a run folder: name a run folder (output/<experiment>/run_NNN)"]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_resume_under_another_wandb_mode_from_the_environment_is_one_line(tmp_path):
    """A run made offline through ``WANDB_MODE``, resumed under ``WANDB_MODE=disabled``, would mark its steps kept
    while no W&B run holds them: refused before training; under its own mode it continues."""
    pytest.importorskip("wandb", reason="W&B is not installed (pip install -e '.[test]')")

    def launch(mode: str, *extra: str) -> subprocess.CompletedProcess:
        cmd = [
            PYTHON,
            "main.py",
            f"experiment.output_root={tmp_path}",
            "experiment.name=run",
            "model.args.backbone_args={widths: [8, 16]}",
            "data.batch_size=64",
            "threads=1",
            "hooks=[{name: wandb}]",
            *extra,
        ]
        env = {**subprocess_env(), "WANDB_MODE": mode}
        return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)

    first = launch("offline", "train.iterations=4")
    assert first.returncode == 0, first.stderr[-3000:]
    run_folder = tmp_path / "run" / "run_001"
    identity = run_folder / "trackers" / "wandb.json"
    assert json.loads(identity.read_text())["settings"]["mode"] == "offline"
    before = identity.read_text(), (run_folder / "trackers" / "wandb.jsonl").read_text()
    refused = launch("disabled", "--resume", str(run_folder), "train.iterations=8")
    assert refused.returncode == 2, refused.stderr[-3000:]
    errors = error_lines(refused.stderr)
    assert len(errors) == 1 and "mode='offline'" in errors[0] and "mode='disabled'" in errors[0], errors
    assert (identity.read_text(), (run_folder / "trackers" / "wandb.jsonl").read_text()) == before
    resumed = launch("offline", "--resume", str(run_folder), "train.iterations=8")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "training state restored" in resumed.stderr + resumed.stdout
