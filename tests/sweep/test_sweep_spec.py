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


def test_a_study_made_for_another_space_is_refused(tmp_path, capsys):
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
    from utils.errors import ConfigError

    with pytest.raises(ConfigError, match="made for another space"):
        open_study(load_spec(str(changed)), url, "maximize")
    with pytest.raises(ConfigError, match="was made to maximize"):
        open_study(load_spec(str(first)), url, "minimize")
