"""``--mode compare``: the runs the PATHs stand for, compared by configuration, written to a folder of its own
(``compare.csv``, ``compare.md``, ``compare.png``, each written whole) and the table printed.

The folder is ``--output`` (a new or empty folder outside every run: ``utils/run/folder.py`` ``named``) or a new
``compare_NNN`` beside the first run found (in its experiment folder), never a folder inside a run.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional, Protocol, Sequence

from utils.compare.figure import draw_figure
from utils.compare.group import group_runs
from utils.compare.monitor import choose_monitor
from utils.compare.narrow import printed_table
from utils.compare.ranking import metric_names, partial_metrics, rank
from utils.compare.table import (
    csv_text,
    heading,
    incomplete_list,
    markdown_table,
    markdown_text,
    repeated_list,
    repeated_seeds,
    runs_list,
    shown_path,
)
from utils.config.load import load_config
from utils.errors import ConfigError, DataError, UserError, name_list
from utils.files.owned import write_atomic, write_text
from utils.log import setup_logging
from utils.references import import_custom
from utils.run.folder import RunFolder, create, named, run_holding
from utils.run.results import ComparedRun, find_runs, read_run

log = logging.getLogger(__name__)

ADVICE = "run the compare again (into a new or empty --output, or without --output)"


def nothing_yet(paths: Sequence[str], incomplete: Sequence[ComparedRun]) -> DataError:
    """What the PATHs hold when no run has a test row yet: how many runs, and how far each got."""
    fresh = [shown_path(record.path) for record in incomplete if not record.rows]
    later = [shown_path(record.path) for record in incomplete if record.rows]
    states = [
        f"{name_list(names, show=3)} {'has' if len(names) == 1 else 'have'} {what}"
        for names, what in (
            (fresh, "not validated yet: in the first epoch, or stopped in it"),
            (later, "validated but not tested: training, or stopped"),
        )
        if names
    ]
    runs = f"{len(incomplete)} run{'s' if len(incomplete) > 1 else ''}"
    return DataError(
        f"nothing to compare in {name_list([repr(str(p)) for p in paths], show=3)} yet: {runs} found, none has a test "
        f"row ({'; '.join(states)}); compare again when a run has finished (its test row is written at its end)"
    )


def output_folder(output: Optional[str], first_run: Path) -> RunFolder:
    """``--output`` (checked and made by ``named``), else a new ``compare_NNN`` in the first run's experiment."""
    if output:
        return named(Path(output))
    experiment = first_run.parent
    holder = run_holding(experiment)
    if holder is not None:  # runs nested inside another run: its records are no place for ours
        raise ConfigError(
            f"the runs' folder '{experiment}' lies inside the run folder '{holder}', where other modes never write; give --output DIR"
        )
    return create(experiment, "compare")


class Publisher(Protocol):
    """Where a comparison also goes, given by the compare command (``--to-tracker``: the runs' MLflow parent run):
    this package reads runs and writes files, and imports no tracker."""

    def check(self, runs: Sequence[Path]) -> None:
        """A UserError when the comparison cannot go there, before its folder is made."""

    def publish(self, runs: Sequence[Path], folder: Path) -> None:
        """Send the comparison written in ``folder``."""


def compare_command(
    paths: Sequence[str], output: Optional[str], overrides: Sequence[str] = (), publisher: Optional[Publisher] = None
) -> int:
    """Compare the runs of ``paths`` (experiment, sweep or run folders) into ``output``; prints the table and
    a last line ``compare: runs=N configurations=K incomplete=I folder=DIR``. Returns the exit code (0).

    ``overrides``: the user's ``custom_imports=[...]`` (the modules of a metric of their own), the only code
    imported: a run's files are data, and the modules they name are never imported. ``publisher``: where the files
    also go, checked before anything is written."""
    setup_logging(None, 0)
    runs = find_runs(paths)
    records = [read_run(run) for run in runs]
    import_custom(load_config(None, list(overrides)).custom_imports if overrides else [], paths)
    keys, configurations, incomplete = group_runs(records)
    if not configurations:
        raise nothing_yet(paths, incomplete)
    if publisher is not None:
        publisher.check(runs)  # before a folder is made: a refused --to-tracker leaves none
    monitor = choose_monitor(records)
    metrics = metric_names(configurations)
    rows = rank(configurations, metrics, monitor)
    for line in [*repeated_seeds(configurations), *partial_metrics(rows, metrics)]:
        log.warning("%s", line)
    head, rest = (
        heading(len(records), rows, monitor),
        (repeated_list(configurations), incomplete_list(keys, incomplete)),
    )
    summary = _joined(head, markdown_table(keys, metrics, rows), *rest)
    image = draw_figure(rows, metrics, monitor, len(incomplete))
    folder = output_folder(output, runs[0])
    try:
        write_text(folder.path, folder.path / "compare.csv", csv_text(keys, metrics, rows, incomplete), ADVICE)
        write_text(folder.path, folder.path / "compare.md", markdown_text(summary, runs_list(rows)), ADVICE)
        write_atomic(folder.path, folder.path / "compare.png", lambda fh: image.save(fh, format="PNG"), ADVICE)
    except UserError:
        folder.abandon()  # a folder this command made and left without a result goes again
        raise
    if publisher is not None:
        publisher.publish(runs, folder.path)
    print(_joined(head, printed_table(keys, metrics, rows, monitor.name, shown_path(folder.path)), *rest), flush=True)
    print(
        f"compare: runs={len(records)} configurations={len(rows)} incomplete={len(incomplete)} "
        f"folder={shown_path(folder.path)}",
        flush=True,
    )
    return 0


def _joined(*parts: str) -> str:
    return "\n\n".join(part for part in parts if part)
