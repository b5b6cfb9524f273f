"""``python -m utils.trackers sync RUN [RUN ...]``: send the records a run's trackers still hold.

A run that ended while its tracker was unreachable keeps the records in ``RUN/trackers/<tracker>.jsonl``; this
sends them (the next ``--resume`` of the run does too) to the tracker run its identity names. Exit 0 when every
record is sent; 2 with one ``error:`` line when a run folder is missing, in use by a training process, or its
tracker still cannot be reached (the records stay, nothing is lost).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import List, Optional

from utils.errors import ConfigError, UserError, one_line
from utils.run_folder import LOCK
from utils.run_lock import release_lock, take_lock
from utils.trackers.sender import Sender, first_line
from utils.trackers.spool import FOLDER, Spool


def backend_of(spool: Spool):
    backend = spool.identity.get("backend")
    if backend == "mlflow":
        from utils.trackers.mlflow_backend import MlflowBackend

        return MlflowBackend.from_identity(spool.identity)
    if backend == "wandb":
        from utils.trackers.wandb_backend import WandbBackend

        return WandbBackend.from_identity(spool.identity)
    raise ConfigError(f"'{spool.identity_path}' names no tracker this framework knows (backend {backend!r})")


def sync(run: Path) -> int:
    """Send every tracker's waiting records of the run folder ``run``; how many were sent."""
    folder = run / FOLDER
    if not folder.is_dir():
        raise ConfigError(f"'{run}' has no trackers/ folder: name a run folder whose config had a tracker hook")
    fd = take_lock(run / LOCK, run)  # a run training in it sends its records itself
    try:
        total = 0
        for identity in sorted(folder.glob("*.json")):
            spool = Spool(folder, identity.stem)
            backend = backend_of(spool)
            try:
                sent = Sender(spool, backend).send_waiting()
            except backend.outages() as err:  # an unreachable tracker: the records stay for the next try
                raise ConfigError(
                    f"tracker {backend.name}: cannot reach {backend.where} ({first_line(err)}); "
                    f"{spool.waiting()} record(s) stay in {spool.records_path}; run this again when it is back"
                ) from err
            finally:
                backend.close()
            logging.getLogger(__name__).info("tracker %s: %d record(s) sent from %s", backend.name, sent, run)
            total += sent
        return total
    finally:
        release_lock(fd)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m utils.trackers", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    send = commands.add_parser("sync", help="send the records a run's trackers hold")
    send.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="a run folder")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        for run in args.runs:
            print(f"{run}: {sync(run)} record(s) sent")
    except UserError as err:
        print(f"error: {one_line(err)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
