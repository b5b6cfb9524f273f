"""A results folder is data: no module in a run folder or an output root is ever imported, whatever names it (a
run's config.yaml, an override, compare's command line), and ``--mode compare`` imports nothing a run's files name."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.fixtures.compare_runs import resolved_config, write_run
from utils.errors import ConfigError
from utils.references import import_custom

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
    for name in [name for name in sys.modules if name.split(".")[0] in ("mine", "output", "results", "runs")]:
        del sys.modules[name]  # what a test imported from its own folder


def test_a_module_in_the_output_root_or_a_run_folder_is_never_imported(on_path):
    run = write_run(on_path / "output" / "exp" / "run_001", resolved_config(on_path / "output" / "exp", 1), None)
    marker = plant(run)
    with pytest.raises(
        ConfigError, match=r"^custom_imports: module 'output\.exp\.run_001\.plugin' would load '"
    ) as err:
        import_custom(["output.exp.run_001.plugin"])
    assert f"inside the output root '{on_path / 'output'}'" in str(err.value)
    assert str(err.value).endswith(
        "move the module into a package of your own outside the output root and run folders, and name that"
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
    with pytest.raises(ConfigError, match=f"inside the output root '{on_path / 'runs'}'"):
        import_custom(["runs.loose.plugin"], [on_path / "runs"])
    assert not marker.exists() and not other.exists() and not planted.exists()
    # a module of the user's own beside them imports
    ours = plant(on_path / "mine")
    import_custom(["mine.plugin"], [on_path / "runs"])
    assert ours.read_text() == "ran"
