"""eval.extra_metrics: torchmetrics classes by name, reported beside the task's metrics, exact across ranks."""

from __future__ import annotations

import pytest

import main
from tests.fixtures.dist_utils import run, torchrun
from tests.fixtures.metrics_rows import rows
from utils.config.load import load_config
from utils.errors import ConfigError, RegistryError
from utils.metrics.extra import snake_case
from utils.references import check_references, monitor_mode

EXTRAS = "eval.extra_metrics=[{name: MulticlassF1Score, average: macro}, {name: MulticlassAveragePrecision}]"


def test_names_and_directions():
    assert snake_case("MulticlassF1Score") == "multiclass_f1_score"
    assert snake_case("MulticlassAUROC") == "multiclass_auroc"
    extras = [{"name": "MulticlassF1Score"}, {"name": "MeanSquaredError"}]
    assert monitor_mode("classification", "multiclass_f1_score", None, extras) == "max"
    assert monitor_mode("classification", "mean_squared_error", None, extras) == "min"
    check_references(load_config(overrides=[EXTRAS, "eval.monitor=multiclass_average_precision"]))
    with pytest.raises(ConfigError, match="reports"):
        check_references(load_config(overrides=[EXTRAS, "eval.monitor=multiclass_f2_score"]))
    with pytest.raises(RegistryError, match="did you mean MulticlassF1Score"):
        check_references(load_config(overrides=["eval.extra_metrics=[{name: MulticlasF1Score}]"]))


@pytest.mark.slow
def test_test_lines_equal_on_one_and_three_ranks_with_an_empty_rank(trained, capsys):
    """2 test samples on 3 ranks: rank 2 holds none; list states (average precision) included."""
    args = ["--mode", "test", "--checkpoint", str(trained["checkpoint"]), EXTRAS]
    three = run(torchrun(3, *args), timeout=180)
    assert three.returncode == 0, three.stderr[-2000:]
    assert main.main(args) == 0
    line = [row for row in capsys.readouterr().out.splitlines() if row.startswith("test: ")]
    assert line == [row for row in three.stdout.splitlines() if row.startswith("test: ")]
    assert "multiclass_f1_score=" in line[0] and "multiclass_average_precision=" in line[0] and "samples=2" in line[0]
    assert "multiclass_average_precision" in rows(trained["out"] / "apps" / "test_002")[-1]


def test_a_name_torchmetrics_lacks_is_one_error_line(trained, capsys):
    assert (
        main.main(["--mode", "test", "--checkpoint", str(trained["checkpoint"]), "eval.extra_metrics=[{name: F1Scor}]"])
        == 2
    )
    err = capsys.readouterr().err
    assert err.strip().count("\n") == 0 and err.startswith("error: ") and "F1Score" in err
