"""Which folders the PATHs of ``--mode compare`` stand for, and what each run recorded.

A run folder holds the run's resolved config (``config.yaml``) and its validation and test rows
(``metrics.jsonl``; a run killed before its first validation has its ``checkpoints/`` only). ``find_runs``
is the one place that turns PATHs into run folders; ``read_run`` reads one: the config tree and the last
test row (None: the run never tested, it is incomplete).

What these files hold is data from whoever made them: a name in them (a sweep table's run) becomes a path only
as a plain folder name beside the sweep; a file too large for what it is, a line that is no JSON object, a test
metric that is no number are each one DataError naming the file (and the line); only a last line cut short, as
a run killed while writing leaves it, is left out with a warning (``metrics.jsonl`` read strictly:
``utils/run/metrics_file.py``).
"""

from __future__ import annotations

import csv
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import yaml

from utils.config.rules import plain_name
from utils.config.yaml_load import load_yaml
from utils.errors import ConfigError, DataError, name_list
from utils.run.folder import CONFIG, METRICS, RunFolder, is_numbered_run
from utils.run.metrics_file import read_strict

log = logging.getLogger(__name__)

SWEEP_TABLE = "trials.csv"  # a sweep's table of trials (utils/sweep/table.py): its column runs names their folders
# what other modes write (utils/run/folder.py numbers them): a --mode test folder holds a config.yaml and a test
# row as a run does, but it tested another run's checkpoint; counted, it would be a seed twice
OTHER_MODES = re.compile(r"^(test|predict|export|compare)_\d+(_|$)")
# the bookkeeping of a metrics row; every other value in a test row is a metric, a number
NOT_METRICS = ("split", "epoch", "step", "samples")
MAX_CONFIG = 16 << 20  # bytes of a config.yaml: a resolved config is a few KB, a config of 1,000,000 values some MB
LEAVE_OUT = "leave its run out of the PATHs"  # what a user may do with a run whose files are broken
FIX_ROW = f"repair or remove that line, or {LEAVE_OUT}"
FIX_CONFIG = "leave its run out of the PATHs (a run writes its resolved config there)"


@dataclass(frozen=True)
class ComparedRun:
    """One run as its files recorded it."""

    path: Path
    config: Dict[str, Any]  # the resolved config tree of config.yaml
    test: Optional[Dict[str, float]]  # the last test row's metrics; None: no test row (incomplete)
    rows: int = 0  # the evaluation rows metrics.jsonl holds (0: the run has not validated yet)
    written: float = 0.0  # when metrics.jsonl was last written (seconds since the epoch): the newest of a seed's runs


def is_run(folder: Path) -> bool:
    """Whether ``folder`` is a training run's folder: its config.yaml and its metrics, or checkpoints, or the
    name of a training run (``run_NNN``: one in its first epoch has written neither yet)."""
    return looks_like_run(folder) and has_own_config(folder)


def looks_like_run(folder: Path) -> bool:
    """Whether ``folder`` holds a training run's records (metrics, checkpoints, or its ``run_NNN`` name with a
    run's file), whatever its config.yaml."""
    run = RunFolder(folder)
    return not OTHER_MODES.match(folder.name) and (
        run.metrics.is_file() or run.checkpoints.is_dir() or is_numbered_run(folder)
    )


def has_own_config(folder: Path) -> bool:
    """Whether the run folder holds its config.yaml, a regular file (not a link: to ``/dev/zero``, to another run's
    config). A run's result belongs to the configuration it trained; without it, its metrics are no one's."""
    try:
        return stat.S_ISREG(os.lstat(RunFolder(folder).config).st_mode)
    except OSError:
        return False


def without_config(folders: Sequence[Path]) -> None:
    """One warning naming the run folders left out for want of their config.yaml (none: nothing said)."""
    if folders:
        log.warning(
            "left out %d run folder(s) without their %s (missing, or not a regular file): %s; a run's metrics count "
            "only with the configuration it trained (restore its %s to count it)",
            len(folders),
            CONFIG,
            name_list([str(folder) for folder in folders], show=3),
            CONFIG,
        )


def _runs_of(candidates: Sequence[Path], missing: List[Path]) -> List[Path]:
    """The runs among ``candidates``; those that look like runs but lack their config.yaml go to ``missing``."""
    runs = []
    for candidate in candidates:
        if not candidate.is_symlink() and looks_like_run(candidate):  # each looked at once (is_run: both tests)
            (runs if has_own_config(candidate) else missing).append(candidate)
    return runs


def _natural(path: Path) -> list:
    """Sort key: run_2 before run_10 (numbers pass 999 in a long sweep)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.name)]


def _runs_in(folder: Path, missing: List[Path]) -> List[Path]:
    """The run folders directly inside ``folder`` (``latest`` and other links left out: they repeat a run)."""
    try:
        entries = list(folder.iterdir())
    except OSError:  # not readable: it holds no run we can read
        return []
    return _runs_of(sorted(entries, key=_natural), missing)


def runs_at(path: Path, missing: Optional[List[Path]] = None) -> List[Path]:
    """The run folders ``path`` stands for: itself when it is one; a sweep's folder (``output/<experiment>/
    sweep_<name>/``) the runs its table of trials lists, beside it; else the runs inside it (an experiment folder).
    Folders that look like runs but lack their config.yaml are left out, added to ``missing``."""
    missing = [] if missing is None else missing
    if is_run(path):
        return [path]
    trials = path / SWEEP_TABLE
    if trials.is_file():
        return _runs_of([path.parent / name for name in sweep_runs(trials)], missing)
    runs = _runs_in(path, missing)
    if not runs and looks_like_run(path):  # a run folder given itself, without its config.yaml
        missing.append(path)
    return runs


def sweep_runs(trials: Path) -> List[str]:
    """The run folders a sweep's ``trials.csv`` lists (column ``runs``), each a folder name beside the sweep's
    folder (in its experiment): a name that would reach elsewhere is a DataError naming the line."""
    names = []
    try:
        with trials.open(newline="", encoding="utf-8") as table:
            reader = csv.DictReader(table)
            for row in reader:
                for name in (row.get("runs") or "").split():
                    if not plain_name(name):
                        raise DataError(
                            f"'{trials}' line {reader.line_num} names the run {quoted(name)}, which is no folder name "
                            "beside the sweep's folder (a sweep's runs are <experiment>/run_NNN_<tag>); repair the table, or give the run folders"
                        )
                    names.append(name)
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise DataError(
            f"cannot read '{trials}' as a sweep's table of trials ({getattr(err, 'strerror', None) or err}); give the run folders instead"
        ) from err
    return names


def find_runs(paths: Sequence[Union[str, Path]]) -> List[Path]:
    """The run folders the PATHs stand for (``runs_at``), in the order given, each once (also when two PATHs
    reach it, or a link does). DataError for a PATH that does not exist, is no folder or stands for no run."""
    found: Dict[Path, Path] = {}
    missing: List[Path] = []
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists():
            raise DataError(
                f"'{given}' does not exist; give experiment folders (output/<experiment>), sweep folders or run folders"
            )
        if not path.is_dir():
            raise DataError(f"'{given}' is not a folder; give experiment folders, sweep folders or run folders")
        missed = len(missing)
        runs = runs_at(path, missing)
        if not runs:
            mode = OTHER_MODES.match(path.name)
            why = (
                f"it is the folder of a --mode {mode.group(1)}, not of a training run"
                if mode
                else f"{len(missing) - missed} run folder(s) there lack their {CONFIG} (missing, or not a regular "
                f"file), and a run's metrics count only with the configuration it trained"
                if len(missing) > missed
                else f"neither it nor a folder in it holds a run's {CONFIG} and {METRICS}, and it has no sweep's {SWEEP_TABLE}"
            )
            raise DataError(f"no runs found in '{given}': {why}")
        for run in runs:
            found.setdefault(run.resolve(), run)
    without_config(list(dict.fromkeys(missing)))
    return list(found.values())


def quoted(value: Any) -> str:
    """A value read from a file, for a message: its repr (a newline stays ``\\n``), cut short past 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _read_error(path: Path, err: Exception) -> DataError:
    return DataError(
        f"cannot read '{path}' ({getattr(err, 'strerror', None) or err}); make it readable, or {LEAVE_OUT}"
    )


def read_config(path: Path) -> Dict[str, Any]:
    """A run's config tree (the safe loader of ``utils/config/yaml_load.py``); DataError naming a broken or huge file."""
    try:
        if path.stat().st_size > MAX_CONFIG:
            raise DataError(
                f"'{path}' holds {path.stat().st_size:,} bytes, more than {MAX_CONFIG:,}: it is no run's config (a few KB); leave its run out of the PATHs"
            )
        config = load_yaml(path.read_text(encoding="utf-8"), fast=True)
    except (OSError, UnicodeDecodeError) as err:
        raise _read_error(path, err) from err
    except yaml.YAMLError as err:
        mark, problem = getattr(err, "problem_mark", None), getattr(err, "problem", None)
        what = f"{problem} (line {mark.line + 1})" if problem and mark else str(err).splitlines()[0]
        raise DataError(f"'{path}' is not a run's config: {what}; {FIX_CONFIG}") from err
    except ConfigError as err:
        raise DataError(f"'{path}' is not a run's config: {str(err).splitlines()[0]}; {FIX_CONFIG}") from err
    if not isinstance(config, dict):
        raise DataError(
            f"'{path}' is not a run's config: it holds {type(config).__name__}, not a mapping of sections; {FIX_CONFIG}"
        )
    return config


def _metric(path: Path, number: int, key: str, value: Any) -> float:
    """A test row's value as a float (NaN and inf are metrics that went wrong: kept, and shown); DataError for
    anything else (a string, true, null, a list), which no metric is."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer past float's range
            pass
    raise DataError(
        f"'{path}' line {number}: test metric {quoted(key)} is {quoted(value)}, not a number (NaN and inf are); {FIX_ROW}"
    )


def tested_metrics(rows: Sequence[Tuple[int, Dict[str, Any]]], path: Path) -> Optional[Dict[str, float]]:
    """The metrics of the last ``"split": "test"`` row of ``rows`` (read from ``path``), None without one."""
    tested = [(number, row) for number, row in rows if row.get("split") == "test"]
    if not tested:
        return None
    number, row = tested[-1]
    return {key: _metric(path, number, key, value) for key, value in row.items() if key not in NOT_METRICS}


def last_test_row(path: Path) -> Optional[Dict[str, float]]:
    """The metrics of the last test row of ``metrics.jsonl`` (``path``), None without one (or without the file)."""
    return tested_metrics(read_strict(path, LEAVE_OUT), path)


def read_run(path: Path) -> ComparedRun:
    """One run: its config tree, its last test row, how many rows it wrote and when."""
    run = RunFolder(path)
    rows = read_strict(run.metrics, LEAVE_OUT)
    written = run.metrics.stat().st_mtime if rows else 0.0
    return ComparedRun(path, read_config(run.config), tested_metrics(rows, run.metrics), len(rows), written)
