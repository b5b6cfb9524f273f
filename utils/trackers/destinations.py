"""Where ``sync`` and ``--mode compare --to-tracker`` send: only to what the user names, never to what a file names.

A run folder is a file others hand you: its ``trackers/mlflow.json`` names a store (``tracking_uri``), and sending
there would give that host the user's credentials (``MLFLOW_TRACKING_TOKEN``, a password). So the identity's store
is only compared with the one the user names in the environment, ``MLFLOW_TRACKING_URI`` (a password in either
compared masked: a run folder keeps it masked), and the records go to the user's. A W&B identity names the folder W&B
writes its offline run in (``settings.dir``): it must lie inside the run folder, or be the ``WANDB_DIR`` the user
names. Each mismatch is one line naming both and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict

from utils.errors import ConfigError
from utils.secret_text import hide, masked
from utils.trackers.mlflow_backend import checked_uri

ENV = "MLFLOW_TRACKING_URI"


def named_store(identity: Dict[str, Any], path: Path, command: str) -> str:
    """The MLflow store the user names (``MLFLOW_TRACKING_URI``), where it is the one the identity in ``path`` names;
    ConfigError otherwise (``command``: what sends, for the message)."""
    theirs = checked_uri(identity["tracking_uri"], f"the tracker run's identity '{path}'")
    given = os.environ.get(ENV)
    if not given:
        raise ConfigError(
            f"'{path}' names the MLflow store {masked(theirs)}, and {command} sends only to a store you name (a run "
            f"folder may come from anyone): {ENV}={masked(theirs)} {command}, if that store is yours"
        )
    mine = checked_uri(hide(given), ENV)
    if masked(mine) != masked(theirs):
        raise ConfigError(
            f"'{path}' names the MLflow store {masked(theirs)}, and {ENV} names {masked(mine)}: {command} sends a "
            f"run's records only to the store its tracker run was made in; set {ENV} to that one, if it is yours, "
            "or leave this folder out"
        )
    return mine


def own_wandb_dir(settings: Dict[str, Any], run: Path, path: Path) -> None:
    """ConfigError where the W&B folder of the identity in ``path`` lies outside the run folder ``run`` and is not the
    ``WANDB_DIR`` the user names: W&B would write there, and remove a killed process's offline run found there."""
    folder = settings.get("dir")
    if not folder or Path(folder).resolve().is_relative_to(Path(run).resolve()):  # links resolved
        return
    named = os.environ.get("WANDB_DIR")
    if named and Path(named).resolve() == Path(folder).resolve():
        return
    raise ConfigError(
        f"'{path}' names {folder} for its W&B files, outside the run folder {run}: sync writes W&B's files only "
        f"inside it or in the WANDB_DIR you name; WANDB_DIR={folder} python -m utils.trackers sync {run}, if that "
        "folder is yours and this run's"
    )
