"""``--mode compare PATH ... [--output DIR]``: finished runs compared by configuration (``utils/compare/``). It reads
the runs' files only: no config of its own, no process group, no device."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from utils.commands.command_line import Command
from utils.commands.options import ModeParser
from utils.compare.command import compare_command

IMPORTS = "custom_imports="  # the one config key compare reads, among its PATHs: the modules of a metric of your own


def add_options(parser: ModeParser) -> None:
    parser.add_argument(
        "paths",
        nargs="*",
        metavar="PATH",
        help="experiment, sweep or run folders; custom_imports=[...]: the modules of a metric of your own "
        "(the runs' files are data: the modules they name are never imported)",
    )
    parser.add_argument(
        "--output",
        help="the folder to write compare.csv, compare.md and compare.png into (a new or empty folder outside "
        "every run; default: a new compare_NNN beside the first run)",
    )

    parser.add_argument(
        "--to-tracker",
        action="store_true",
        help="also write the comparison to the MLflow parent run the compared runs share (a sweep's: docs/trackers.md)",
    )


def split_imports(parser: ModeParser, args: argparse.Namespace) -> None:
    """The PATHs, and the ``custom_imports=[...]`` given among them (``args.imports``)."""
    args.imports = [item for item in args.paths if item.startswith(IMPORTS)]
    args.paths = [item for item in args.paths if not item.startswith(IMPORTS)]
    if not args.paths:
        parser.error("--mode compare needs at least one PATH: an experiment folder, a sweep folder or run folders")


class ToTracker:
    """``--to-tracker``: the comparison also goes to the MLflow parent run its runs share
    (``utils/trackers/compare_upload.py``), checked before its folder is made."""

    def check(self, runs: Sequence[Path]) -> None:
        from utils.trackers.compare_upload import shared_parent

        shared_parent(runs)

    def publish(self, runs: Sequence[Path], folder: Path) -> None:
        from utils.trackers.compare_upload import upload

        upload(runs, folder)


def run(args: argparse.Namespace) -> int:
    return compare_command(args.paths, args.output, args.imports, ToTracker() if args.to_tracker else None)


COMMAND = Command(
    "--mode compare",
    "compare",
    "the runs of the PATHs by configuration: mean, std, 95% interval and p-value over seeds, as a table and a figure",
    add_options,
    run,
    split_imports,
)
