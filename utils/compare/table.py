"""The comparison as text: ``compare.csv`` (every number at full precision, incomplete runs as rows of their
own) and ``compare.md`` (the table, the incomplete runs, the runs of each row).

Columns: ``rank``, the varied config keys, ``n`` (complete runs: seeds), for every test metric
``test_<metric>_mean``, ``_std``, ``_ci_low``, ``_ci_high``, then ``p_value`` (the monitor against rank 1);
the CSV adds ``state`` (complete; repeated: a seed's older complete run, left out; incomplete) and ``runs`` (the
run folders, ``;`` between them).
"""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import List, Optional, Sequence

from utils.compare.group import MISSING, SEED, Configuration, seed_of, shown, values_of
from utils.compare.monitor import Monitor
from utils.compare.ranking import Row
from utils.compare.stats import CONFIDENCE
from utils.errors import name_list
from utils.run.results import ComparedRun

STATS = ("mean", "std", "ci_low", "ci_high")


def shown_path(path: Path) -> str:
    """A run folder as the user would type it: relative to the working directory when inside it."""
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def columns(keys: Sequence[str], metrics: Sequence[str]) -> List[str]:
    """The table's columns (the CSV adds ``state`` and ``runs``)."""
    return ["rank", *keys, "n", *[f"test_{metric}_{stat}" for metric in metrics for stat in STATS], "p_value"]


def _cells(row: Row, metrics: Sequence[str], number: str) -> List[str]:
    """A row's statistics, ``number``-formatted (``{!r}``: full precision), empty where there is none."""
    cells = []
    for metric in metrics:
        summary = row.stats.get(metric)
        for stat in STATS:
            value = getattr(summary, stat) if summary is not None else None
            cells.append("" if value is None else number.format(value))
    return cells


def _p(value: Optional[float], number: str) -> str:
    return "" if value is None else number.format(value)


def csv_text(
    keys: Sequence[str], metrics: Sequence[str], rows: Sequence[Row], incomplete: Sequence[ComparedRun]
) -> str:
    """``compare.csv``: one line per configuration, then one per incomplete run (no statistics)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([*columns(keys, metrics), "state", "runs"])
    for rank, row in enumerate(rows, start=1):
        config = row.configuration
        values = [shown(config.values[key]) for key in keys]
        runs = ";".join(shown_path(run.path) for run in config.runs)
        cells = _cells(row, metrics, "{!r}")
        writer.writerow([rank, *values, config.n, *cells, _p(row.p_value, "{!r}"), "complete", runs])
    blank = [""] * (len(metrics) * len(STATS) + 1)
    for row in rows:
        values = [shown(row.configuration.values[key]) for key in keys]
        for record in row.configuration.repeats:
            writer.writerow(["", *values, 0, *blank, "repeated", shown_path(record.path)])
    for record in incomplete:
        values = [shown(value) for value in values_of(record, keys).values()]
        writer.writerow(["", *values, 0, *blank, "incomplete", shown_path(record.path)])
    return buffer.getvalue()


def _markdown_row(cells: Sequence[object]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def heading(runs: int, rows: Sequence[Row], monitor: Monitor) -> str:
    """What the table shows and how its numbers are made, in two sentences."""
    configurations = f"{len(rows)} configuration{'s' if len(rows) != 1 else ''}"
    return (
        f"{runs} run(s), {configurations}, sorted best first by test_{monitor.name}_mean (eval.monitor, "
        f"{monitor.better()}). Intervals: {CONFIDENCE:.0%} Student-t, mean +- t(0.975, n-1) * std / sqrt(n), std with "
        f"ddof=1; p_value: Welch's t-test of test_{monitor.name} against rank 1, two-sided (empty where n < 2, a "
        "value is NaN or inf, or all seeds of both rows gave one value)."
    )


def table_cells(keys: Sequence[str], metrics: Sequence[str], rows: Sequence[Row]) -> List[List[str]]:
    """The Markdown table's rows as text: the CSV's configuration rows, numbers to 4 decimals (p-values to 3 digits)."""
    return [
        [str(rank), *[shown(row.configuration.values[key]) for key in keys], str(row.configuration.n)]
        + [*_cells(row, metrics, "{:.4f}"), _p(row.p_value, "{:.3g}")]
        for rank, row in enumerate(rows, start=1)
    ]


def markdown_table(
    keys: Sequence[str], metrics: Sequence[str], rows: Sequence[Row], shown_columns: Optional[Sequence[str]] = None
) -> str:
    """The Markdown table of ``table_cells``: every column, or those of ``shown_columns`` in the table's order."""
    head = columns(keys, metrics)
    kept = [at for at, name in enumerate(head) if shown_columns is None or name in shown_columns]
    align = ["---:" if name == "rank" or name == "n" or name.startswith(("test_", "p_")) else "---" for name in head]
    lines = [_markdown_row([head[at] for at in kept]), "|" + "|".join(align[at] for at in kept) + "|"]
    lines += [_markdown_row([cells[at] for at in kept]) for cells in table_cells(keys, metrics, rows)]
    return "\n".join(lines)


def incomplete_list(keys: Sequence[str], incomplete: Sequence[ComparedRun]) -> str:
    """The runs without a test row, each with its configuration: listed, never averaged."""
    if not incomplete:
        return ""
    lines = ["Incomplete runs (no test row; not averaged):", ""]
    for record in incomplete:
        values = ", ".join(f"{key}={shown(value)}" for key, value in values_of(record, keys).items())
        lines.append(f"- {shown_path(record.path)}" + (f" ({values})" if values else ""))
    return "\n".join(lines)


def repeated_seeds(configurations: Sequence[Configuration]) -> List[str]:
    """One sentence per seed that a configuration has more than one complete run of: the run counted, the others."""
    lines = []
    for configuration in configurations:
        for kept in configuration.runs:
            seed = seed_of(kept)
            left = [shown_path(run.path) for run in configuration.repeats if seed_of(run) == seed]
            if left:
                lines.append(
                    f"{configuration.label()}, seed {shown(kept.config.get(SEED, MISSING))}: {len(left) + 1} complete runs, "
                    f"one sample: the newest, {shown_path(kept.path)}, is counted, not {name_list(left, show=3)}"
                )
    return lines


def repeated_list(configurations: Sequence[Configuration]) -> str:
    """The runs left out as repeats of a seed: listed, never averaged."""
    lines = repeated_seeds(configurations)
    if not lines:
        return ""
    return "\n".join(
        ["Repeated seeds (one configuration and seed is one sample; not averaged):", ""]
        + [f"- {line}" for line in lines]
    )


def runs_list(rows: Sequence[Row]) -> str:
    """Which run folders each row averages."""
    lines = ["Runs of each row:", ""]
    lines += [
        f"{rank}. " + ", ".join(shown_path(run.path) for run in row.configuration.runs)
        for rank, row in enumerate(rows, start=1)
    ]
    return "\n".join(lines)


def markdown_text(summary: str, runs: str) -> str:
    """``compare.md``: the summary (heading, table, incomplete runs: what the command prints), then the runs."""
    return f"# Comparison\n\n{summary}\n\n{runs}\n"
