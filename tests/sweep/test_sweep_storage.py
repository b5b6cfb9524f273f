"""The study's storage, real Optuna files: a journal a crash cut short is repaired (its complete records kept,
the repair named), one damaged otherwise is named and left as it is; a storage that cannot be opened is one
error line naming the problem and the fix."""

from __future__ import annotations

import importlib.util
import json
import logging
import os

import pytest

from utils.errors import ConfigError
from utils.sweep.study import open_storage

optuna = pytest.importorskip("optuna")


def _study(path, trials):
    """A journal study with ``trials`` complete trials (its last record: the last trial's completion)."""
    study = optuna.create_study(storage=open_storage(str(path)), study_name="s", direction="maximize")
    for value in range(trials):
        trial = study.ask()
        trial.set_user_attr("runs", ["run_001"])
        study.tell(trial, float(value))
    return study


def _load(path):
    return optuna.load_study(study_name="s", storage=open_storage(str(path)))


def test_a_journal_cut_by_a_crash_is_repaired_and_takes_new_trials(tmp_path, caplog):
    path = tmp_path / "study.journal"
    _study(path, 2)
    whole = path.read_bytes()
    path.write_bytes(whole[:-25])  # the last record (trial 1's completion) cut short
    # what the sweep used to do next: Optuna's own writer appends onto the cut line
    backend = optuna.storages.journal.JournalFileBackend(str(path))
    backend.append_logs([{"op_code": 8, "worker_id": "w", "trial_id": 1, "user_attr": {"seen": True}}])
    with caplog.at_level(logging.WARNING):
        study = _load(path)
    assert f"study journal {path}: dropped 1 record(s) a crash cut short" in caplog.text
    trials = study.get_trials()
    assert [t.state.name for t in trials] == ["COMPLETE", "RUNNING"]  # trial 1 lost only its cut completion
    assert trials[1].user_attrs == {"runs": ["run_001"], "seen": True}  # the record written after the cut is kept
    study.tell(study.ask(), 5.0)
    assert len(_load(path).get_trials()) == 3
    assert all(json.loads(line) for line in path.read_bytes().splitlines())  # every line a record again


def test_a_cut_last_record_is_dropped_before_the_next_write(tmp_path, caplog):
    path = tmp_path / "study.journal"
    _study(path, 1)
    path.write_bytes(path.read_bytes()[:-10])
    with caplog.at_level(logging.WARNING):
        study = _load(path)
    assert "dropped 1 record(s)" in caplog.text
    study.tell(study.ask(), 1.0)  # written on a line of its own
    assert [t.state.name for t in _load(path).get_trials()] == ["RUNNING", "COMPLETE"]


def test_a_journal_damaged_otherwise_is_named_and_left_as_it_is(tmp_path):
    path = tmp_path / "study.journal"
    _study(path, 1)
    lines = path.read_bytes().splitlines(keepends=True)
    damaged = b"".join([lines[0], b"not a record\n", *lines[1:]])
    path.write_bytes(damaged)
    with pytest.raises(ConfigError, match=r"study journal '.*' line 2 is not a journal record .* move it aside"):
        _load(path)
    assert path.read_bytes() == damaged


def test_a_storage_that_cannot_be_opened_is_one_line(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("not a database\n")
    os.mkfifo(tmp_path / "fifo.journal")
    cases = {
        f"sqlite:///{bad}": "(file is not a database); it must be an SQLite database",
        f"sqlite:///{tmp_path / 'missing' / 'x.db'}": "(unable to open database file)",
        str(tmp_path / "missing" / "study.journal"): "the study journal's folder",
        str(tmp_path): "is not a regular file (a folder, FIFO or device)",
        str(tmp_path / "fifo.journal"): "is not a regular file",  # Optuna's open blocked on it for ever
        "/dev/zero": "is not a regular file",
        "nosuch://host/db": "is not a database URL",
    }
    if not any(importlib.util.find_spec(driver) for driver in ("psycopg", "psycopg2")):
        # SQLAlchemy's driver for postgresql:// (psycopg from 2.1 on, psycopg2 before), named with its pip package
        cases["postgresql://user:secret@localhost/db"] = "which is not installed; pip install psycopg"
    for url, expected in cases.items():
        with pytest.raises(ConfigError) as err:
            open_storage(url)
        message = str(err.value)
        assert expected in message and "\n" not in message and "secret" not in message, (url, message)
    assert bad.read_text() == "not a database\n"
    assert not (tmp_path / "missing").exists()


def _open_at(barrier, url, errors):
    barrier.wait()
    try:
        open_storage(url)
    except ConfigError as err:
        errors.put(str(err))


@pytest.mark.slow  # four processes create a database's schema
def test_workers_started_together_all_open_one_new_sqlite_database(tmp_path):
    """Each worker of a sweep creates the schema of a new database; started at the same moment, the ones that
    lose the race find it made (they failed with 'UNIQUE constraint failed: alembic_version')."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    url = f"sqlite:///{tmp_path / 'study.db'}"
    barrier, errors = context.Barrier(4), context.Queue()
    workers = [context.Process(target=_open_at, args=(barrier, url, errors)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert [worker.exitcode for worker in workers] == [0] * 4
    assert errors.empty(), errors.get()
    optuna.create_study(storage=url, study_name="s").ask()  # the database they made works
