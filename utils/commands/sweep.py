"""``--sweep SWEEP.yaml``: a sweep's trials, each an ordinary run of ``--mode train`` (``utils/sweep/``)."""

from __future__ import annotations

import argparse

from utils.log import setup_logging


def sweep_command(args: argparse.Namespace) -> int:
    """``--sweep``: the trials run as child processes of this one, which holds no process group and no device."""
    from utils.sweep.driver import default_build, run_sweep

    setup_logging(None, 0)
    return run_sweep(args.sweep, args.config, args.overrides, default_build(args.config, args.overrides))
