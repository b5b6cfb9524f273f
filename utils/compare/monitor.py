"""The metric that ranks the configurations: the runs' ``eval.monitor``, better in the direction training used.

The direction is what a run chose its best checkpoint by: ``eval.monitor_mode``, or when null the direction the
metric declares (``utils/references.py`` ``monitor_mode``, the function training calls; a metric of the user's
own is registered by importing the run's ``custom_imports`` first).
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple, Sequence

from utils.compare.collect import CONFIG, RunRecord
from utils.errors import ConfigError, DataError, RegistryError
from utils.references import import_custom, monitor_mode


class Monitor(NamedTuple):
    """The metric the rows are sorted by and the direction that makes it better (``max`` or ``min``)."""

    name: str
    mode: str

    def better(self) -> str:
        return "higher is better" if self.mode == "max" else "lower is better"


def _eval_section(record: RunRecord) -> Dict[str, Any]:
    section = record.config.get("eval")
    monitor = section.get("monitor") if isinstance(section, dict) else None
    if not isinstance(monitor, str):
        raise DataError(f"'{record.path / CONFIG}' has no eval.monitor: is it a run's resolved config?")
    return section


def run_monitor(record: RunRecord) -> Monitor:
    """``record``'s monitor and its direction, as its training decided them."""
    section = _eval_section(record)
    monitor, mode = section["monitor"], section.get("monitor_mode")
    args = (section.get("metric", "classification"), monitor, mode, section.get("extra_metrics") or [])
    try:
        try:
            return Monitor(monitor, monitor_mode(*args))
        except RegistryError:  # a metric of the user's own: registered by the run's custom imports
            import_custom(record.config.get("custom_imports") or [])
            return Monitor(monitor, monitor_mode(*args))
    except ConfigError as err:
        raise DataError(f"'{record.path / CONFIG}': {err}") from None


def choose_monitor(records: Sequence[RunRecord]) -> Monitor:
    """The monitor of the first run (the first PATH's): runs of other experiments may monitor something else,
    one order is needed; rows that do not report it sort last."""
    return run_monitor(records[0])
