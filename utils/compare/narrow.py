"""The printed comparison narrowed to the terminal: 16 columns (two config keys, four statistics of three metrics)
do not fit 80 characters, and a wrapped Markdown table is unreadable. The columns that say most come first: the
rank, the monitor's mean, ``n``, the varied config keys, the monitor's interval, ``p_value`` and std, then the
other metrics' means, then their other statistics; those that fit the width are printed in the table's order,
and a line names the others and the files holding every column (``compare.md``, ``compare.csv``).

A terminal's width only: printed into a pipe or a file (no terminal, no ``COLUMNS``) the table is whole, as
``compare.md`` holds it.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import List, Optional, Sequence

from utils.compare.ranking import Row
from utils.compare.table import columns, markdown_table, table_cells
from utils.errors import name_list

MIN_WIDTH = 40  # a narrower terminal still gets the rank and the monitor's mean


def terminal_width() -> Optional[int]:
    """The width to fit: ``COLUMNS`` when set, else the terminal's when stdout is one; None (the whole table) else."""
    if os.environ.get("COLUMNS", "").strip().isdigit() or sys.stdout.isatty():
        return max(MIN_WIDTH, shutil.get_terminal_size().columns)
    return None


def by_importance(head: Sequence[str], keys: Sequence[str], monitor: str) -> List[str]:
    """The columns of ``head``, those that say most first."""
    mine = f"test_{monitor}_"
    first = ["rank", f"{mine}mean", "n", *keys, f"{mine}ci_low", f"{mine}ci_high", "p_value", f"{mine}std"]
    means = [name for name in head if name.endswith("_mean")]
    order = [*first, *means, *head]
    return [name for at, name in enumerate(order) if name in head and name not in order[:at]]


def fitting_columns(
    keys: Sequence[str], metrics: Sequence[str], rows: Sequence[Row], monitor: str, width: int
) -> List[str]:
    """The columns whose Markdown table (``| a | b |``) fits ``width`` characters, most important first: a column
    that does not fit is passed over for a narrower one after it; the rank and the monitor's mean always stay."""
    head = columns(keys, metrics)
    cells = table_cells(keys, metrics, rows)
    size = {name: max([len(name), *(len(row[at]) for row in cells)]) + 3 for at, name in enumerate(head)}
    kept: List[str] = []
    used = 1  # the row's first "|"
    for name in by_importance(head, keys, monitor):
        if len(kept) < 2 or used + size[name] <= width:
            kept.append(name)
            used += size[name]
    return kept


def left_out_line(head: Sequence[str], kept: Sequence[str], folder: str) -> str:
    """The line under a narrowed table: which columns it leaves out, and where every column is."""
    out = [name for name in head if name not in kept]
    return (
        f"{len(out)} more column(s) in {folder}/compare.md and compare.csv (the table fits the terminal's "
        f"width): {name_list(out, show=4)}"
    )


def printed_table(keys: Sequence[str], metrics: Sequence[str], rows: Sequence[Row], monitor: str, folder: str) -> str:
    """The table as the command prints it: whole where it fits (or no terminal is there), else the columns that
    fit and the line naming the others and ``folder``, which holds every column."""
    width = terminal_width()
    head = columns(keys, metrics)
    kept = fitting_columns(keys, metrics, rows, monitor, width) if width is not None else head
    if len(kept) == len(head):
        return markdown_table(keys, metrics, rows)
    return f"{markdown_table(keys, metrics, rows, kept)}\n\n{left_out_line(head, kept, folder)}"
