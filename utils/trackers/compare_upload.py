"""``--mode compare ... --to-tracker``: the comparison's files, written to the MLflow parent run of the compared
runs (a sweep's: ``sweep_parent.py``), as artifacts under ``compare/`` and a tag naming the folder they came from.

Every compared run must be a child of the same parent on the same server (its ``trackers/mlflow.json`` says
which, read and checked as the sender reads it, ``identity.py``: a corrupt one is one line naming it); otherwise one
line names the runs that are not. The comparison is written to its folder first: a server that cannot be reached
leaves it there, and the line says so.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence, Tuple

from utils.errors import ConfigError, name_list
from utils.trackers.extras import require
from utils.trackers.identity import read_identity
from utils.trackers.sender import first_line
from utils.trackers.spool import FOLDER

log = logging.getLogger(__name__)
FILES = ("compare.md", "compare.csv", "compare.png")


def shared_parent(runs: Sequence[Path]) -> Tuple[str, str]:
    """(tracking URI, parent run id) that every run of ``runs`` names; ConfigError otherwise."""
    parents, lacking = set(), []
    for run in runs:
        found = read_identity(Path(run) / FOLDER / "mlflow.json")  # {} when the run has none
        if found.get("parent_run_id"):
            parents.add((found["tracking_uri"], found["parent_run_id"]))
        else:
            lacking.append(str(run))
    if lacking or len(parents) != 1:
        what = (
            f"{name_list(lacking, show=3)} {'is' if len(lacking) == 1 else 'are'} no sweep's MLflow child run"
            if lacking
            else f"they belong to {len(parents)} parent runs"
        )
        raise ConfigError(
            f"--to-tracker writes to the MLflow parent run the compared runs share, and {what}; compare one sweep's "
            "runs (trained with hooks=[{name: mlflow}]), or leave out --to-tracker"
        )
    return parents.pop()


def upload(runs: Sequence[Path], folder: Path) -> str:
    """Write ``folder``'s comparison files to the runs' parent run; its id."""
    require("mlflow", "--to-tracker")
    from mlflow.tracking import MlflowClient

    from utils.trackers.mlflow_backend import MlflowBackend

    uri, parent = shared_parent(runs)
    MlflowBackend.quiet_client()
    client = MlflowClient(tracking_uri=uri)
    try:
        for name in FILES:
            if (folder / name).is_file():
                client.log_artifact(parent, str(folder / name), "compare")
        client.set_tag(parent, "regtrain.compare", str(folder))
    except MlflowBackend.outages() as err:
        raise ConfigError(
            f"--to-tracker: cannot reach {uri} ({first_line(err)}); the comparison is in {folder}: run the compare "
            "again with --to-tracker when the server is reachable"
        ) from err
    log.info("compare written to MLflow run %s at %s (artifacts compare/)", parent, uri)
    return parent
