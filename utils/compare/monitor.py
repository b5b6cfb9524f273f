"""The metric that ranks the configurations: the runs' ``eval.monitor``, better in the direction training used.

The direction is what a run chose its best checkpoint by: ``eval.monitor_mode`` as its config.yaml records it,
or when null the direction the metric declares (``utils/references.py`` ``monitor_mode``, the function training
calls), found among the built-in metrics and torchmetrics. Reading results never imports code: a metric of the
user's own is known only when the user names its module on compare's command line (``custom_imports=[...]``),
never by the run's ``custom_imports``.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, NamedTuple, Sequence

from utils.errors import ConfigError, DataError, RegistryError, one_line
from utils.import_place import check_import_place
from utils.references import monitor_mode
from utils.registry import METRICS
from utils.run.folder import CONFIG
from utils.run.results import ComparedRun

MODULE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")  # a module path, as the config schema takes it


class Monitor(NamedTuple):
    """The metric the rows are sorted by and the direction that makes it better (``max`` or ``min``)."""

    name: str
    mode: str

    def better(self) -> str:
        return "higher is better" if self.mode == "max" else "lower is better"


def _eval_section(record: ComparedRun) -> Dict[str, Any]:
    """The run's ``eval`` section, its keys of the types training wrote; DataError for any other."""
    section = record.config.get("eval")
    monitor = section.get("monitor") if isinstance(section, dict) else None
    if not isinstance(monitor, str):
        raise DataError(f"'{record.path / CONFIG}' has no eval.monitor: is it a run's resolved config?")
    extras = section.get("extra_metrics") or []
    odd = []
    if section.get("monitor_mode") not in ("max", "min", None):
        odd.append(f"eval.monitor_mode {section['monitor_mode']!r}")
    if not isinstance(section.get("metric", ""), str):
        odd.append(f"eval.metric {section['metric']!r}")
    if not isinstance(extras, list) or not all(isinstance(e, dict) and isinstance(e.get("name"), str) for e in extras):
        odd.append("eval.extra_metrics")
    if odd:
        raise DataError(
            f"'{record.path / CONFIG}' has {', '.join(odd)} of a kind no run writes: is it a run's resolved config?"
        )
    return section


def _their_imports(record: ComparedRun) -> List[str]:
    """The run's ``custom_imports`` that are module paths (to name in a message; never imported)."""
    names = record.config.get("custom_imports")
    return [name for name in names if isinstance(name, str) and MODULE.match(name)] if isinstance(names, list) else []


def _outside_results(name: str) -> bool:
    """Whether the module ``name`` would load from outside every results folder (found, never imported)."""
    try:
        check_import_place(name)
    except ConfigError:
        return False
    return True


def run_monitor(record: ComparedRun) -> Monitor:
    """``record``'s monitor and its direction, as its training decided them, from its files and the metrics this
    process knows (the built-in ones and those of the user's command-line ``custom_imports``)."""
    section = _eval_section(record)
    monitor, mode = section["monitor"], section.get("monitor_mode")
    if mode is not None:  # what the run chose its best checkpoint by: no metric needs looking up
        return Monitor(monitor, mode)
    metric = section.get("metric", "classification")
    try:
        return Monitor(monitor, monitor_mode(metric, monitor, None, section.get("extra_metrics") or []))
    except RegistryError as err:
        if metric in METRICS:  # an extra metric torchmetrics does not have (another version)
            raise DataError(f"'{record.path / CONFIG}': {one_line(err)}") from None
        theirs = _their_imports(record)
        named = f" (the run's custom_imports: {', '.join(theirs)})" if theirs else ""
        ours = [name for name in theirs if _outside_results(name)] or ["my_package.my_metrics"]
        raise DataError(
            f"'{record.path / CONFIG}': eval.metric {metric!r} is no built-in metric and the run's eval.monitor_mode is null, so "
            f"which {monitor!r} is better is known only to that metric's code, and compare never imports what a run's files "
            f"name{named}; if you trust that code, name its module (in a package of yours, outside every results folder) "
            f"after the PATHs: custom_imports=[{','.join(ours)}]"
        ) from None
    except ConfigError as err:
        raise DataError(f"'{record.path / CONFIG}': {one_line(err)}") from None


def choose_monitor(records: Sequence[ComparedRun]) -> Monitor:
    """The monitor of the first run (the first PATH's): runs of other experiments may monitor something else,
    one order is needed; rows that do not report it sort last."""
    return run_monitor(records[0])
