"""A sweep names its trial to each run on the command line (``--trial N --trial-study NAME --trial-storage URL``),
and the run checks it as it starts: a storage that does not open, a study or a trial that is not there, or a trial
that is not running any more is one error line, before any run folder exists. The trial is found through Optuna's
public storage API (``requeue_dead_trials`` too)."""

from __future__ import annotations

import os
import socket

import pytest

import main
from tests.conftest import fast_overrides
from tests.fixtures.outputs import one_error
from utils.errors import ConfigError
from utils.sweep.study import CONFIG_ID, HOST, PID, REQUEUED, open_storage, requeue_dead_trials, running_trial

optuna = pytest.importorskip("optuna")


@pytest.fixture
def journal(tmp_path):
    """A study ``s`` with a complete trial 0 and a running trial 1."""
    path = tmp_path / "study.journal"
    study = optuna.create_study(storage=open_storage(str(path)), study_name="s", direction="maximize")
    study.tell(study.ask(), 0.5)
    study.ask()
    return str(path)


def test_the_running_trial_is_found_by_its_number(journal):
    study = optuna.load_study(study_name="s", storage=open_storage(journal))
    assert optuna.trial.Trial(study, running_trial(journal, "s", 1)).number == 1


@pytest.mark.parametrize(
    "study, number, expected",
    [
        ("other", 1, "--trial-study 'other': no such study in "),
        ("s", 7, "--trial 7: study 's' in "),
        ("s", 0, "--trial 0 of study 's' in "),
    ],
)
def test_a_trial_that_is_not_there_or_not_running_is_named(journal, study, number, expected):
    with pytest.raises(ConfigError) as refused:
        running_trial(journal, study, number)
    message = str(refused.value)
    assert message.startswith(expected) and message.endswith("outside a sweep leave out the --trial options"), message
    assert number != 0 or "is complete, not running" in message


def test_a_run_named_a_trial_that_is_not_there_starts_nothing(journal, tmp_path, capsys):
    trial = ["--trial", "3", "--trial-study", "s", "--trial-storage", journal, "--trial-pruner", "median"]
    assert main.main([*fast_overrides(tmp_path / "out", "t", epochs=1), *trial]) == 2
    assert one_error(capsys).startswith("error: --trial 3: study 's' in ")
    assert not (tmp_path / "out").exists()  # checked before the run's folder is made
    missing = ["--trial", "1", "--trial-storage", str(tmp_path / "no" / "study.journal")]
    with pytest.raises(SystemExit) as stop:
        main.main([*fast_overrides(tmp_path / "out", "t", epochs=1), *missing])
    assert stop.value.code == 2 and "--trial-study missing: --trial, --trial-study and --trial-storage name" in (
        capsys.readouterr().err
    )


def test_a_dead_sweeps_running_trial_is_failed_and_queued_again(journal):
    study = optuna.load_study(study_name="s", storage=open_storage(journal))
    (running,) = study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    handle = optuna.trial.Trial(study, running_trial(journal, "s", running.number))
    handle.set_user_attr(HOST, socket.gethostname())
    handle.set_user_attr(PID, 2**22 + os.getpid())  # no such process
    assert requeue_dead_trials(study, journal) == [running.number]
    after = study.get_trials()
    assert after[running.number].state == optuna.trial.TrialState.FAIL and after[running.number].user_attrs[REQUEUED]
    assert after[-1].state == optuna.trial.TrialState.WAITING and after[-1].user_attrs[CONFIG_ID] == running.number
