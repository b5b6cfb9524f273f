"""``--sweep SWEEP.yaml [--config BASE.yaml] [key=value ...]``: a sweep's trials, each configuration's seeds as
ordinary runs of ``--mode train`` in child processes (``utils/sweep/``); this process holds no process group and
no device."""

from __future__ import annotations

import argparse

from utils.commands.command_line import Command
from utils.commands.options import ModeParser, add_config
from utils.log import setup_logging
from utils.sweep.driver import default_build, run_sweep

CONTINUES = "; a sweep continues by itself: the same command again resumes its trials, so leave out --resume"


def add_options(parser: ModeParser) -> None:
    parser.add_argument(
        "--sweep",
        metavar="SWEEP.yaml",
        required=True,
        help="train the sweep's trials (Optuna): every configuration of its space once per seed, as ordinary runs",
    )
    add_config(parser)


def run(args: argparse.Namespace) -> int:
    setup_logging(None, 0)
    return run_sweep(args.sweep, args.config, args.overrides, default_build(args.config, args.overrides))


COMMAND = Command(
    "--sweep",
    "train",
    "the trials of the sweep file, each configuration once per seed, in sweep_<name>/ beside the runs",
    add_options,
    run,
    instead={
        "--resume": CONTINUES,
        "--resume-force": CONTINUES,
        "--reset-optimizer": CONTINUES,
        "--print-config": "; --print-config prints one run's config, and each trial of a sweep has its own: leave out --sweep",
    },
)
