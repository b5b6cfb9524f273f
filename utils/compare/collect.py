"""Which folders the PATHs of ``--mode compare`` stand for, and what each run recorded.

A run folder holds the run's resolved config (``config.yaml``) and its validation and test rows
(``metrics.jsonl``; a run killed before its first validation has its ``checkpoints/`` only). ``find_runs``
is the one place that turns PATHs into run folders; ``read_run`` reads one: the config tree and the last
test row (None: the run never tested, it is incomplete).
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import yaml

from utils.errors import ConfigError, DataError
from utils.yaml_load import load_yaml

CONFIG = "config.yaml"
SWEEP_TABLE = "trials.csv"  # a sweep's table of trials (utils/sweep/table.py): its column runs names their folders
METRICS = "metrics.jsonl"
# what other modes write (utils/run_folder.py numbers them): a --mode test folder holds a config.yaml and a test
# row as a run does, but it tested another run's checkpoint; counted, it would be a seed twice
OTHER_MODES = re.compile(r"^(test|predict|export|compare)_\d+(_|$)")
# the bookkeeping of a metrics row; every other number in a test row is a metric
NOT_METRICS = ("split", "epoch", "step", "samples")


@dataclass(frozen=True)
class RunRecord:
    """One run as its files recorded it."""

    path: Path
    config: Dict[str, Any]  # the resolved config tree of config.yaml
    test: Optional[Dict[str, float]]  # the last test row's metrics; None: no test row (incomplete)


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a training run's folder: its config.yaml and its metrics (or checkpoints)."""
    return (
        not OTHER_MODES.match(folder.name)
        and (folder / CONFIG).is_file()
        and ((folder / METRICS).is_file() or (folder / "checkpoints").is_dir())
    )


def _natural(path: Path) -> list:
    """Sort key: run_2 before run_10 (numbers pass 999 in a long sweep)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _runs_in(folder: Path) -> List[Path]:
    """The run folders directly inside ``folder`` (``latest`` and other links left out: they repeat a run)."""
    try:
        entries = list(folder.iterdir())
    except OSError:  # not readable: it holds no run we can read
        return []
    return sorted((entry for entry in entries if not entry.is_symlink() and is_run(entry)), key=_natural)


def runs_at(path: Path) -> List[Path]:
    """The run folders ``path`` stands for: itself when it is one; a sweep's folder (``output/<experiment>/
    sweep_<name>/``) the runs its table of trials lists, beside it; else the runs inside it (an experiment folder)."""
    if is_run(path):
        return [path]
    trials = path / SWEEP_TABLE
    if trials.is_file():
        with trials.open(newline="") as table:
            names = [name for row in csv.DictReader(table) for name in (row.get("runs") or "").split()]
        return [path.parent / name for name in names if is_run(path.parent / name)]
    return _runs_in(path)


def find_runs(paths: Sequence[Union[str, Path]]) -> List[Path]:
    """The run folders the PATHs stand for (``runs_at``), in the order given, each once (also when two PATHs
    reach it, or a link does). DataError for a PATH that does not exist, is no folder or stands for no run."""
    found: Dict[Path, Path] = {}
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists():
            raise DataError(
                f"'{given}' does not exist; give experiment folders (output/<experiment>), sweep folders or run folders"
            )
        if not path.is_dir():
            raise DataError(f"'{given}' is not a folder; give experiment folders, sweep folders or run folders")
        runs = runs_at(path)
        if not runs:
            mode = OTHER_MODES.match(path.name)
            why = (
                f"it is the folder of a --mode {mode.group(1)}, not of a training run"
                if mode
                else f"neither it nor a folder in it holds a run's {CONFIG} and {METRICS}, and it has no sweep's {SWEEP_TABLE}"
            )
            raise DataError(f"no runs found in '{given}': {why}")
        for run in runs:
            found.setdefault(run.resolve(), run)
    return list(found.values())


def read_config(path: Path) -> Dict[str, Any]:
    """A run's config tree (the safe loader of ``utils/yaml_load.py``); DataError naming a broken file."""
    try:
        config = load_yaml(path.read_text(encoding="utf-8"), fast=True)
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read '{path}' ({getattr(err, 'strerror', None) or err})") from err
    except (yaml.YAMLError, ConfigError) as err:
        raise DataError(f"'{path}' is not a run's config: {str(err).splitlines()[0]}") from err
    if not isinstance(config, dict):
        raise DataError(f"'{path}' is not a run's config: it holds {type(config).__name__}, not a mapping of sections")
    return config


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def last_test_row(path: Path) -> Optional[Dict[str, float]]:
    """The metrics of the last ``"split": "test"`` row of ``metrics.jsonl`` (``path``), None without one (or
    without the file). Every line is read: a corrupt one is a DataError naming the file and the line."""
    if not path.is_file():
        return None
    test = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read '{path}' ({getattr(err, 'strerror', None) or err})") from err
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise DataError(f"'{path}' line {number} is not a JSON object ({err}): {line[:80]!r}") from None
        if not isinstance(row, dict):
            raise DataError(f"'{path}' line {number} is not a JSON object: {line[:80]!r}")
        if row.get("split") == "test":
            test = {key: float(value) for key, value in row.items() if key not in NOT_METRICS and _number(value)}
    return test


def read_run(path: Path) -> RunRecord:
    """One run: its config tree and its last test row."""
    return RunRecord(path, read_config(path / CONFIG), last_test_row(path / METRICS))
