"""The comparison as rows: every configuration's statistics for every test metric, sorted best first by the
monitor, with the p-value of each against the best (``stats.py``)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from utils.compare.group import Configuration
from utils.compare.monitor import Monitor
from utils.compare.stats import Summary, summarize, welch_p_values
from utils.errors import name_list


@dataclass
class Row:
    """One configuration's line of the table."""

    configuration: Configuration
    stats: Dict[str, Summary]  # metric -> its summary over the seeds that report it
    p_value: Optional[float] = None  # the monitor against the best row's (Welch); None for the best row itself

    def values(self, metric: str) -> List[float]:
        return [run.test[metric] for run in self.configuration.runs if run.test and metric in run.test]


def metric_names(configurations: Sequence[Configuration]) -> List[str]:
    """Every test metric, in the order the runs' test rows write them (the first run's first)."""
    order: Dict[str, None] = {}
    for configuration in configurations:
        for run in configuration.runs:
            order.update(dict.fromkeys(run.test or {}))
    return list(order)


def _sort_key(row: Row, monitor: Monitor) -> float:
    """Smaller is better: the monitor's mean, negated when higher is better; rows without it (or NaN, inf) last."""
    summary = row.stats.get(monitor.name)
    if summary is None or not math.isfinite(summary.mean):
        return math.inf
    return -summary.mean if monitor.mode == "max" else summary.mean


def rank(configurations: Sequence[Configuration], metrics: Sequence[str], monitor: Monitor) -> List[Row]:
    """One row per configuration, best first by the monitor's mean (ties keep the order the runs were found in),
    each with its p-value against the first row."""
    rows = []
    for configuration in configurations:
        row = Row(configuration, {})
        for metric in metrics:
            values = row.values(metric)
            if values:
                row.stats[metric] = summarize(values)
        rows.append(row)
    rows.sort(key=lambda row: _sort_key(row, monitor))
    if rows and monitor.name in rows[0].stats:
        others = rows[1:]
        p_values = welch_p_values([row.values(monitor.name) for row in others], rows[0].values(monitor.name))
        for row, p_value in zip(others, p_values):
            row.p_value = p_value
    return rows


def partial_metrics(rows: Sequence[Row], metrics: Sequence[str]) -> List[str]:
    """One sentence per row and metric that some of the row's runs do not report: its statistics are over fewer
    runs than the row's ``n`` (runs of another version, or of another task, mixed in)."""
    lines = []
    for row in rows:
        runs = row.configuration.runs
        for metric in metrics:
            lacking = [str(run.path) for run in runs if run.test is not None and metric not in run.test]
            if lacking and len(lacking) < len(runs):
                lines.append(
                    f"{row.configuration.label()}: test_{metric} is in {len(runs) - len(lacking)} of its {len(runs)} runs' "
                    f"test rows (not in {name_list(lacking, show=3)}); its statistics are over {len(runs) - len(lacking)} run(s), not n={len(runs)}"
                )
    return lines
