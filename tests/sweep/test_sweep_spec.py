"""The sweep file is checked before any trial: each bad key, kind, range or value is one error line (exit 2)
naming the sweep; every value of the space is tried against the config schema and the registries."""

from __future__ import annotations

import pytest
import yaml

import main

pytest.importorskip("optuna")

GOOD = {"space": {"optim.lr": {"grid": [0.01, 0.1]}}}


@pytest.mark.parametrize(
    "spec, expected",
    [
        ({"space": {"optim.lr": {"grid": [-1.0]}}}, "space optim.lr value -1.0"),
        ({"space": {"model.args.backbone": {"choice": ["small_cnn", "resnet19"]}}}, "'resnet19'"),
        ({"space": {"optim.lr": {"uniform": [0.1, 0.01]}}, "trials": 2, "sampler": "tpe"}, "low < high"),
        ({"space": {"optim.lr": {"log_uniform": [0.0, 0.1]}}, "trials": 2, "sampler": "random"}, "low > 0"),
        ({"space": {"optim.lr": {"uniform": [0.01, 0.1]}}}, "sampler grid needs listed values"),
        ({"space": {"optim.lr": {"uniform": [0.01, 0.1]}}, "sampler": "tpe"}, "'trials' is required"),
        ({**GOOD, "seeds": [1, 1]}, "seeds must be a list of distinct integers"),
        ({**GOOD, "sampler": "bayes"}, "sampler must be one of"),
        ({**GOOD, "parallel": 0}, "parallel must be an integer >= 1"),
        ({**GOOD, "nproc": 2}, "unknown key(s) ['nproc']"),
        ({"space": {"seed": {"grid": [1, 2]}}}, "seeds go in 'seeds'"),
        ({"space": {"optim.lr": [0.1]}}, "space optim.lr must be one of"),
        ({"space": {}}, "'space' is empty"),
        ({"space": {"optim.nonsense": {"grid": [1]}}}, "optim.nonsense"),
        # a value the config can never take, named as such (not as the text 'NaN' a float key refuses)
        ({"space": {"optim.lr": {"grid": [0.01, float("nan")]}}}, "a NaN is not a valid value for optim.lr"),
        ({"space": {"optim.lr": {"uniform": [0.0, float("inf")]}}, "sampler": "tpe", "trials": 2}, "an infinity is"),
        ({"space": {"model.args.backbone_args": {"grid": [{"widths": [8, float("nan")]}]}}}, "a NaN is not a valid"),
        # a value listed twice trains its configuration and seeds twice (1 and 1.0 are one float value)
        ({"space": {"optim.lr": {"grid": [0.01, 0.1, 0.01]}}}, "space optim.lr lists 0.01 twice"),
        ({"space": {"optim.lr": {"choice": [1, 1.0]}}, "sampler": "random", "trials": 1}, "lists 1.0 twice"),
        # the keys the sweep sets on every run itself
        ({"space": {"experiment.name": {"grid": ["a", "b"]}}}, "give experiment.name=NAME after the sweep file"),
        ({"space": {"experiment.output_root": {"grid": ["a"]}}}, "give experiment.output_root=DIR after"),
        ({"space": {"experiment.run_tag": {"grid": ["a"]}}}, "the sweep tags each run with its configuration"),
        ({"space": {"experiment": {"grid": [{"name": "a"}]}}}, "space key experiment (it holds experiment.name)"),
    ],
)
def test_a_bad_sweep_file_is_one_error_line_before_any_trial(tmp_path, capsys, spec, expected):
    sweep = tmp_path / "bad.yaml"
    sweep.write_text(yaml.safe_dump(spec))
    assert main.main(["--sweep", str(sweep), f"experiment.output_root={tmp_path / 'out'}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and expected in err[0], err
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").rglob("run_*"))  # nothing trained


def test_a_missing_sweep_file_and_resume_are_refused(tmp_path, capsys):
    assert main.main(["--sweep", str(tmp_path / "none.yaml")]) == 2
    assert "is not a file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main.main(["--sweep", str(tmp_path / "none.yaml"), "--resume"])
    assert stop.value.code == 2 and "leave out --resume" in capsys.readouterr().err


def test_a_study_made_for_another_space_or_direction_is_refused(tmp_path, capsys):
    """A study without the record of its sweep (made before it was kept) is checked by its trials' space."""
    from utils.errors import ConfigError
    from utils.sweep.changes import check_changes
    from utils.sweep.spec import load_spec
    from utils.sweep.study import open_study, space_distributions

    first = tmp_path / "a" / "same.yaml"
    first.parent.mkdir()
    first.write_text(yaml.safe_dump(GOOD))
    url = str(tmp_path / "study.journal")
    study = open_study(load_spec(str(first)), url, "maximize")
    trial = study.ask(space_distributions(load_spec(str(first)).space))
    study.tell(trial, 0.5)
    changed = tmp_path / "b" / "same.yaml"
    changed.parent.mkdir()
    changed.write_text(yaml.safe_dump({"space": {"optim.lr": {"grid": [0.5]}}}))
    with pytest.raises(ConfigError, match="made for another space"):
        check_changes(open_study(load_spec(str(changed)), url, "maximize"), load_spec(str(changed)), "top1", url)
    with pytest.raises(ConfigError, match="was made to maximize"):
        open_study(load_spec(str(first)), url, "minimize")


def test_trials_past_the_size_of_the_space_are_capped_at_it(tmp_path, caplog):
    from utils.sweep.spec import load_spec

    sweep = tmp_path / "capped.yaml"
    space = {"optim.lr": {"grid": [0.01, 0.1]}, "train.epochs": {"int": [1, 3]}}
    sweep.write_text(yaml.safe_dump({"space": space, "sampler": "random", "trials": 10}))
    with caplog.at_level("INFO"):
        assert load_spec(str(sweep)).trials == 6
    assert "trials 10, but the space holds 6 configurations: 6 trials" in caplog.text
    sweep.write_text(yaml.safe_dump({"space": {"optim.lr": {"grid": [0.01, 0.1]}}, "trials": 3}))
    assert load_spec(str(sweep)).trials == 2  # the grid sampler's own case
    sweep.write_text(yaml.safe_dump({"space": {"optim.lr": {"uniform": [0.01, 0.1]}}, "sampler": "tpe", "trials": 9}))
    assert load_spec(str(sweep)).trials == 9  # a range holds more configurations than any count
