"""A results folder is data: no module in a run folder or an output root is ever imported, whatever names it (a
run's config.yaml, an override, compare's command line), and ``--mode compare`` imports nothing a run's files name."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

import main
from tests.conftest import ROOT, subprocess_env
from tests.fixtures.compare_runs import resolved_config, write_run
from tests.fixtures.outputs import one_error
from utils.errors import ConfigError
from utils.references import import_custom
from utils.registry import METRICS

# a module whose import leaves a file beside itself: whether the file exists says whether it ran
PLUGIN = "from pathlib import Path\n\nPath(__file__).with_name('IMPORTED').write_text('ran')\n"


def plant(folder: Path) -> Path:
    """``folder/plugin.py``, which would write ``folder/IMPORTED`` if it ran."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plugin.py").write_text(PLUGIN)
    return folder / "IMPORTED"


@pytest.fixture
def on_path(tmp_path, monkeypatch) -> Iterator[Path]:
    """``tmp_path`` on sys.path and the working folder (so ``output/`` is the default output root there)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for name in [
        name for name in sys.modules if name.split(".")[0] in ("mine", "my_metrics", "output", "results", "runs")
    ]:
        del sys.modules[name]  # what a test imported from its own folder


def test_a_module_in_the_output_root_or_a_run_folder_is_never_imported(on_path):
    run = write_run(on_path / "output" / "exp" / "run_001", resolved_config(on_path / "output" / "exp", 1), None)
    marker = plant(run)
    with pytest.raises(
        ConfigError, match=r"^custom_imports: module 'output\.exp\.run_001\.plugin' would load '"
    ) as err:
        import_custom(["output.exp.run_001.plugin"])
    assert f"inside the results folder '{on_path / 'output'}'" in str(err.value)
    assert str(err.value).endswith(
        "move the module into a package of your own outside every results folder, and name that"
    )
    # a run folder elsewhere (results copied under another name) is refused by what it holds
    elsewhere = write_run(
        on_path / "results" / "exp" / "run_002", resolved_config(on_path / "results" / "exp", 1), None
    )
    other = plant(elsewhere)
    with pytest.raises(ConfigError, match=f"inside the run folder '{elsewhere}'"):
        import_custom(["results.exp.run_002.plugin"])
    # the configured output root too, with no run folder on the way
    planted = plant(on_path / "runs" / "loose")
    with pytest.raises(ConfigError, match=f"inside the results folder '{on_path / 'runs'}'"):
        import_custom(["runs.loose.plugin"], [on_path / "runs"])
    assert not marker.exists() and not other.exists() and not planted.exists()
    # a module of the user's own beside them imports
    ours = plant(on_path / "mine")
    import_custom(["mine.plugin"], [on_path / "runs"])
    assert ours.read_text() == "ran"


def means(table: Path) -> list:
    """The test_score_mean column of a compare.csv, in its order."""
    with open(table, newline="") as handle:
        return [row["test_score_mean"] for row in csv.DictReader(handle)]


# a metric of the user's own, lower is better: known to compare only when the user names its module
USER_METRIC = """from utils.metrics.base import Metric
from utils.registry import METRICS


@METRICS.register("user_score")
class UserScore(Metric):
    def direction(self, name):
        return "min"
"""


def crafted(experiment: Path, **values) -> Path:
    """Two runs of a metric no built-in knows (``user_score``), whose config names the first run's own module; the
    module's import would leave IMPORTED in that run. The marker's path is returned."""
    for seed, score in ((1, 0.3), (2, 0.7)):
        config = resolved_config(experiment, seed, optim__lr=seed / 10, eval__metric="user_score", **values)
        config["eval"]["monitor"] = "score"
        config["custom_imports"] = [f"output.{experiment.name}.run_001.plugin"]
        write_run(experiment / f"run_00{seed}", config, {"score": score})
    return plant(experiment / "run_001")


@pytest.mark.slow  # one main.py process (about 4 s)
def test_compare_never_imports_what_a_run_names(tmp_path):
    """The run's custom_imports were imported to find its metric's direction: output/ (under the project root,
    on sys.path) made a module planted in a results folder importable, and compare ran it."""
    marker = crafted(tmp_path / "output" / "exp")
    env = {**subprocess_env(), "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "main.py"), "--mode", "compare", "output/exp"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: 'output/exp/run_001/config.yaml': eval.metric 'user_score' is no built-in metric and the run's "
        "eval.monitor_mode is null, so which 'score' is better is known only to that metric's code, and compare never "
        "imports what a run's files name (the run's custom_imports: output.exp.run_001.plugin); if you trust that code, "
        "name its module (in a package of yours, outside every results folder) after the PATHs: "
        "custom_imports=[my_package.my_metrics]"
    )
    assert not marker.exists() and not list((tmp_path / "output" / "exp").glob("compare_*"))


@pytest.fixture
def own_metrics(monkeypatch):
    """The metric registry as it is now, given back after the test (a test's user metric leaves with it)."""
    assert "classification" in METRICS  # the built-in metrics imported into the registry first
    monkeypatch.setattr(METRICS, "_items", dict(METRICS._items))


def test_a_metric_of_the_users_own_is_known_by_the_users_command_line_only(on_path, own_metrics, capsys):
    experiment = on_path / "output" / "exp"
    marker = crafted(experiment)
    # the run's own module named on the command line: refused as any module in a results folder
    args = ["--mode", "compare", str(experiment), "--output", str(on_path / "table")]
    assert main.main([*args, "custom_imports=[output.exp.run_001.plugin]"]) == 2
    assert one_error(capsys).startswith("error: custom_imports: module 'output.exp.run_001.plugin' would load '")
    assert not marker.exists() and not (on_path / "table").exists()
    # the user's own module: the metric is known, lower is better
    (on_path / "my_metrics.py").write_text(USER_METRIC)
    assert main.main([*args, "custom_imports=[my_metrics]"]) == 0
    assert "sorted best first by test_score_mean (eval.monitor, lower is better)" in capsys.readouterr().out
    assert means(on_path / "table" / "compare.csv") == ["0.3", "0.7"]
    assert not marker.exists()


def test_the_direction_a_run_recorded_needs_no_code(on_path, capsys):
    """eval.monitor_mode in the run's config.yaml is the direction it trained with: data, no metric looked up."""
    experiment = on_path / "output" / "exp"
    marker = crafted(experiment, eval__monitor_mode="max")
    assert main.main(["--mode", "compare", str(experiment)]) == 0
    assert "sorted best first by test_score_mean (eval.monitor, higher is better)" in capsys.readouterr().out
    assert means(experiment / "compare_001" / "compare.csv") == ["0.7", "0.3"]
    assert not marker.exists()
