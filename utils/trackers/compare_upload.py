"""``--mode compare ... --to-tracker``: the comparison's files, written to the MLflow parent run of the compared
runs (a sweep's: ``sweep_parent.py``), as artifacts under ``compare/`` and a tag naming the folder they came from.

Every compared run must be a child of the same parent on the same server (its ``trackers/mlflow.json`` says
which, read and checked as the sender reads it, ``identity.py``: a corrupt one is one line naming it); otherwise one
line names the runs that are not. That server must be the one the user names, ``MLFLOW_TRACKING_URI``
(``destinations.py``: run folders may come from anyone), and each compared run's MLflow run must be tagged with its
folder's id and be the parent's child there, before anything is written to the parent. The comparison is written to
its folder first: a server that cannot be reached leaves it there, and the line says so.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Sequence, Tuple

from utils.errors import ConfigError, name_list
from utils.secret_text import reveal
from utils.trackers.destinations import named_store
from utils.trackers.extras import require
from utils.trackers.identity import read_identity
from utils.trackers.sender import first_line
from utils.trackers.spool import identity_file

log = logging.getLogger(__name__)
FILES = ("compare.md", "compare.csv", "compare.png")


COMMAND = "python main.py --mode compare ... --to-tracker"


def shared_parent(runs: Sequence[Path]) -> Tuple[str, str]:
    """(tracking URI, parent run id) that every run of ``runs`` names, the URI the user's (``named_store``);
    ConfigError otherwise."""
    parents, lacking = set(), []
    for run in runs:
        found = read_identity(identity_file(run, "mlflow"))  # {} when the run has none
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
    uri, parent = parents.pop()
    return named_store({"tracking_uri": uri}, identity_file(runs[0], "mlflow"), COMMAND), parent


def found_tags(client: Any, run_id: Any) -> dict:
    """The tags of MLflow run ``run_id``; none where there is no such run."""
    from mlflow.exceptions import RestException

    try:
        return client.get_run(run_id).data.tags if run_id else {}
    except RestException as err:
        if err.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        return {}


def check_children(client: Any, runs: Sequence[Path], parent: str) -> None:
    """ConfigError unless each run's MLflow run is its folder's (the ``regtrain.folder_id`` tag) and ``parent``'s
    child: identities name runs, and a handed one could name anyone's."""
    from utils.trackers.mlflow_backend import FOLDER_TAG

    for run in runs:
        identity = read_identity(identity_file(run, "mlflow"))
        run_id = identity.get("run_id")
        tags = found_tags(client, run_id)
        if tags.get(FOLDER_TAG) != identity.get("folder_id") or tags.get("mlflow.parentRunId") != parent:
            raise ConfigError(
                f"--to-tracker: '{identity_file(run, 'mlflow')}' names MLflow run {run_id}, which is not that folder's "
                f"child of run {parent} (its {FOLDER_TAG} and parent differ); nothing was written: compare one sweep's "
                "runs as they were trained, or leave out --to-tracker"
            )


def upload(runs: Sequence[Path], folder: Path) -> str:
    """Write ``folder``'s comparison files to the runs' parent run; its id."""
    require("mlflow", "--to-tracker")
    from mlflow.tracking import MlflowClient

    from utils.trackers.mlflow_backend import MlflowBackend

    uri, parent = shared_parent(runs)
    MlflowBackend.quiet_client()
    client = MlflowClient(tracking_uri=reveal(uri))  # the password only here (utils/secret_text.py)
    try:
        check_children(client, runs, parent)
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
