"""The same sweep again with a changed sweep file (real journal studies): added seeds continue the finished
configurations, a change that would mix incomparable trials is one error line naming old -> new; a
configuration the sampler draws again is not trained again; each trial and seed says where the sweep is. Nothing
here trains: the trials are told by hand, or their runs are found done."""

from __future__ import annotations

import json
import logging
import re
import threading

import pytest
import yaml

from utils.errors import ConfigError
from utils.sweep.changes import check_changes
from utils.sweep.driver import _work, suggest
from utils.sweep.spec import load_spec
from utils.sweep.study import claim, continue_trials, open_study, used
from utils.sweep.table import best_trial, trial_rows
from utils.sweep.trial_runs import TrialContext, tag

optuna = pytest.importorskip("optuna")

GRID = {"space": {"optim.lr": {"grid": [0.01, 0.1]}}, "seeds": [0, 1]}


def _open(tmp_path, spec, monitor="top1"):
    """The study of sweep file ``same.yaml`` holding ``spec``, opened as the sweep opens it."""
    (tmp_path / "same.yaml").write_text(yaml.safe_dump(spec))
    loaded = load_spec(str(tmp_path / "same.yaml"))
    study = open_study(loaded, str(tmp_path / "study.journal"), "maximize")
    return study, loaded, check_changes(study, loaded, monitor, "study.journal")


def _finish(study, spec, value):
    """Ask the next trial (the sampler's, or one queued again), claim it and tell it ``value``."""
    trial = study.ask()
    claim(trial)
    suggest(trial, spec)
    study.tell(trial, value)
    return trial


def test_added_seeds_queue_each_finished_configuration_again(tmp_path, caplog):
    study, spec, added = _open(tmp_path, GRID)
    assert added == [] and spec.seeds == [0, 1]
    _finish(study, spec, 0.5)
    study, spec, added = _open(tmp_path, {**GRID, "seeds": [2, 1, 0]})
    assert added == [2] and spec.seeds == [0, 1, 2]  # the study's order, then the new seed
    assert continue_trials(study) == [0]
    assert used(study) == 1  # one configuration, carried on: it counts once against trials
    assert _finish(study, spec, 0.75).params == study.trials[0].params  # the queued trial: configuration 0, all seeds
    rows = trial_rows(study, ["optim.lr"])
    assert [(r["configuration"], r["state"]) for r in rows] == [(0, "complete (continued in trial 1)"), (0, "complete")]
    assert best_trial(study).number == 1
    assert _open(tmp_path, {**GRID, "seeds": [0, 1, 2]})[2] == []  # recorded: the same file again adds nothing


@pytest.mark.parametrize(
    "change, monitor, expected",
    [
        ({"seeds": [1]}, "top1", "seeds [0, 1] -> [1] leaves out [0]"),
        ({"space": {"optim.lr": {"grid": [0.1, 0.01]}}}, "top1", 'space {"optim.lr": {"grid": [0.01, 0.1]}} -> '),
        ({"sampler": "random", "trials": 2}, "top1", "sampler grid -> random"),
        ({}, "top5", "monitor top1 -> top5"),
        ({"nproc_per_trial": 2}, "top1", "nproc_per_trial 1 -> 2"),
    ],
)
def test_a_change_the_finished_trials_cannot_take_is_refused(tmp_path, change, monitor, expected):
    study, spec, _ = _open(tmp_path, GRID)
    _finish(study, spec, 0.5)
    with pytest.raises(ConfigError) as err:
        _open(tmp_path, {**GRID, **change}, monitor)
    assert expected in str(err.value) and "another experiment.name" in str(err.value), str(err.value)


def test_a_pruner_change_takes_effect_and_a_study_without_trials_takes_any_change(tmp_path, caplog):
    study, _, _ = _open(tmp_path, GRID)
    _open(tmp_path, {**GRID, "seeds": [5], "sampler": "random", "trials": 1})  # no trial yet: nothing to compare
    study, spec, _ = _open(tmp_path, GRID)
    _finish(study, spec, 0.5)
    with caplog.at_level(logging.INFO):
        _open(tmp_path, {**GRID, "pruner": "median"})
    assert "pruner none -> median, from the next trial on" in caplog.text


def test_a_configuration_drawn_again_is_not_trained_again(tmp_path):
    study, spec, _ = _open(tmp_path, {"space": {"optim.lr": {"grid": [0.01]}}})
    _finish(study, spec, 0.5)
    spec.trials = 2  # more than the grid holds (the sweep caps this; two workers asking at once get there too)
    _work(study, spec, None, threading.Lock(), "", tmp_path)  # nothing to train: no run context needed
    rows = trial_rows(study, ["optim.lr"])
    assert [r["state"] for r in rows] == ["complete", "fail (same as trial 0)"]
    assert best_trial(study).number == 0


def test_each_trial_and_seed_says_where_the_sweep_is(tmp_path, caplog):
    """A sweep was silent for minutes between its start and its table: each trial says when it starts and ends,
    and each seed when it is done (trial, configuration, seeds done of all, elapsed)."""
    study, spec, _ = _open(tmp_path, {"space": {"optim.lr": {"grid": [0.01]}}, "seeds": [0, 1]})
    experiment = tmp_path / "exp"
    for number, (seed, top1) in enumerate([(0, 0.5), (1, 0.75)], start=1):  # runs a killed sweep finished
        run = experiment / f"run_{number:03d}_{tag(0, {'optim.lr': 0.01}, seed)}"
        run.mkdir(parents=True)
        rows = [{"split": "val", "epoch": 0, "top1": top1}, {"split": "test", "epoch": 0, "top1": top1}]
        (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        (run / "config.yaml").write_text(f"seed: {seed}\n")  # a run's metrics count only beside its own config
    ctx = TrialContext([], experiment, [0, 1], 1, "study.journal", spec.name, "top1", "maximize", 1)
    with caplog.at_level(logging.INFO):
        _work(study, spec, ctx, threading.Lock(), "", tmp_path)
    lines = [re.sub(r"\d+\.\d s", "T", m) for m in caplog.messages if m.startswith("trial ")]
    assert lines == [
        "trial 0 (configuration 0, 1 of 1): {'optim.lr': 0.01}; 2 seed(s); T into the sweep",
        "trial 0: seed 0 done before (1/2 seeds done): best top1=0.5000; T into the sweep",
        "trial 0: seed 1 done before (2/2 seeds done): best top1=0.7500; T into the sweep",
        "trial 0 done in T: top1=0.6250 (mean of 2 seed(s)); T into the sweep",
    ], caplog.messages
