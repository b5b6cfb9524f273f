"""A sweep's study journal is a file others hand over: every attribute the sweep keeps on a trial (its
configuration, host, PID, run folders) made hostile by ``fields.py`` is refused in one line where the study is
opened (``utils/sweep/attrs.py``), or read correctly by what uses it (the trials table, the configurations carried
on): a crafted ``config_id: 'abc'`` or ``runs: [7]`` were tracebacks of the next --sweep."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hostile.fields import Format, check_format, register
from utils.errors import ConfigError

optuna = pytest.importorskip("optuna", reason="Optuna is not installed (pip install -e '.[sweep]')")

ATTRS = {"config_id": 0, "same_as": 1, "pid": 4242, "host": "node7", "requeued": False, "runs": ["run_001_t000"]}


def make(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "attrs.json").write_text(json.dumps(ATTRS))
    return folder / "attrs.json"


def read(path: Path, own: Path) -> None:
    """A study holding one finished trial with the attributes of ``path``, opened and tabled as the sweep does."""
    from utils.sweep.attrs import check_attrs
    from utils.sweep.study import carried_on, configuration
    from utils.sweep.table import trial_rows

    try:
        attrs = json.loads(path.read_bytes().decode("utf-8", "surrogateescape"))
    except ValueError as err:  # Optuna's own reader refuses such a record: not what this test is about
        raise ConfigError(str(err)) from err
    if not isinstance(attrs, dict):
        raise ConfigError("no attributes")
    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=1.0, params={}, distributions={}, user_attrs=attrs))
    check_attrs(study, str(path))
    trials = study.get_trials(deepcopy=False)
    assert configuration(trials[0]) == attrs.get("config_id", 0) and carried_on(trials) == {}
    assert trial_rows(study, [])[0]["runs"] == " ".join(attrs.get("runs", []))


ATTRIBUTES = register(Format("sweep trial attributes", make, read))


def test_every_trial_attribute_hostile_is_one_line_or_a_correct_read(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    assert check_format(ATTRIBUTES, tmp_path) > 100


@pytest.mark.parametrize("record", [7, "x", {"seeds": "0"}, {"seeds": [0, None]}])
def test_a_study_s_sweep_record_it_never_writes_is_one_line(tmp_path, record):
    from utils.sweep.changes import RECORD, check_changes
    from utils.sweep.spec import load_spec

    (tmp_path / "s.yaml").write_text("space: {optim.lr: {grid: [0.1]}}\n")
    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(value=1.0, params={}, distributions={}))
    study.set_user_attr(RECORD, record)
    with pytest.raises(ConfigError, match="holds a record of its sweep that this framework never writes"):
        check_changes(study, load_spec(str(tmp_path / "s.yaml")), "top1", "journal")
