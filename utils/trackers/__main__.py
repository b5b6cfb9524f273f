"""``python -m utils.trackers sync RUN [RUN ...]``: send the records a run's trackers still hold.

A run that ended while its tracker was unreachable keeps the records in ``RUN/trackers/<tracker>.jsonl``; this sends
them (the next ``--resume`` of the run does too) to the tracker run its identity names, in the MLflow store the user
names (``MLFLOW_TRACKING_URI``, which must be the one the identity names: ``destinations.py``). Exit 0 when every
record is sent; 2 with one ``error:`` line for each run folder that is missing, in use by a training process, holds
a corrupt identity, needs a tracker library that is not installed, or whose tracker still cannot be reached (the
records stay, nothing is lost); 1 when a folder met a bug, logged with its traceback. Either way every folder named
is tried.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path
from typing import List, Optional

from utils.errors import ConfigError, UserError, one_line
from utils.files.writable import name_too_long
from utils.run.folder import LOCK
from utils.run.lock import release_lock, take_lock
from utils.trackers.destinations import named_store, own_wandb_dir
from utils.trackers.extras import require
from utils.trackers.owner import made_elsewhere
from utils.trackers.sender import Sender, first_line
from utils.trackers.spool import FOLDER, Spool, tracker_names

log = logging.getLogger(__name__)


def backend_of(spool: Spool, run: Path):
    """The backend of ``spool`` (of the run folder ``run``), sending where the user names (``destinations.py``)."""
    backend = spool.identity.get("backend")
    if backend in ("mlflow", "wandb"):
        require(backend, f"sending the records of '{spool.identity_path}' (the tracker run of {backend})")
    waiting = spool.waiting() > 0  # nothing to send: no store is asked, none need be named
    if backend == "mlflow":
        from utils.trackers.mlflow_backend import MlflowBackend

        where = named_store(spool.identity, spool.identity_path, f"{COMMAND} {run}") if waiting else None
        return MlflowBackend.from_identity(spool.identity, where)
    if backend == "wandb":
        from utils.trackers.wandb_backend import WandbBackend

        own_wandb_dir(spool.identity.get("settings") or {}, run, spool.identity_path)
        return WandbBackend.from_identity(spool.identity)
    raise ConfigError(f"'{spool.identity_path}' names no tracker this framework knows (backend {backend!r})")


COMMAND = "python -m utils.trackers sync"
RETRIES, PAUSE_S = 4, 3.0  # an outage of seconds (a killed run's W&B process still holding its run) is waited out


def send_retrying(sender: Sender) -> int:
    """``sender.send_waiting()``, tried again after a pause while the tracker is out (``RETRIES`` times)."""
    for attempt in range(RETRIES):
        try:
            return sender.send_waiting()
        except Exception as err:
            if sender.kind(err) != "outage" or attempt == RETRIES - 1:
                raise
            time.sleep(PAUSE_S)
    return 0


def sync(run: Path) -> int:
    """Send every tracker's waiting records of the run folder ``run``; how many were sent."""
    folder = run / FOLDER
    too_long = name_too_long(run)  # every look at such a path raises OSError (File name too long)
    if too_long is not None:
        raise ConfigError(f"'{run}' {too_long}: name a run folder (output/<experiment>/run_NNN)")
    if run.exists() and not run.is_dir():
        raise ConfigError(f"'{run}' is a file, not a run folder: name a run folder (output/<experiment>/run_NNN)")
    if not run.is_dir():
        raise ConfigError(f"'{run}' does not exist: name a run folder (output/<experiment>/run_NNN)")
    names = tracker_names(folder)
    if not names:
        raise ConfigError(
            f"'{run}' holds no tracker's records (trackers/*.json): name a run folder whose config had a tracker hook"
        )
    fd = take_lock(run / LOCK, run)  # a run training in it sends its records itself
    try:
        total = 0
        for name in names:
            spool = Spool(folder, name)
            made = made_elsewhere(spool, run)
            if made is not None:
                raise ConfigError(
                    f"tracker {name}: the records in {spool.folder} were made in {made} (this folder is a copy, and "
                    "that one holds them too): they are that folder's tracker run's; sync that folder, or --resume "
                    "this one, which sets them aside and gives it a tracker run of its own"
                )
            backend = backend_of(spool, run)
            sender = Sender(spool, backend)
            try:
                sent = send_retrying(sender)
            except Exception as err:
                kind = sender.kind(err)
                if kind in ("local", "bug"):  # this side's own line (a full disk), or a traceback
                    raise
                raise ConfigError(
                    f"tracker {backend.name}: {sender.what_failed(kind)} ({first_line(err)}); {spool.waiting()} "
                    f"record(s) stay in {spool.records_path}; run this again when it takes them"
                ) from err
            finally:
                sender.finish()
            log.info("tracker %s: %d record(s) sent from %s", backend.name, sent, run)
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
    refused, bugs = 0, 0
    for run in args.runs:  # each folder on its own: one that fails leaves the others to go
        try:
            print(f"{run}: {sync(run)} record(s) sent")
        except UserError as err:
            print(f"error: {one_line(err)}", file=sys.stderr)
            refused += 1
        except Exception:  # a bug: its traceback names where; the other folders still go
            log.exception("sync of %s failed", run)
            bugs += 1
    return 1 if bugs else 2 if refused else 0


if __name__ == "__main__":
    sys.exit(main())
