"""A sweep in a tracker: each trial's runs are children of one parent run for the sweep (MLflow nested runs; W&B
groups the runs by the study's name instead), tagged with the trial's number, parameters and seed.

The parent's id is kept in ``<sweep's experiment folder>/trackers/mlflow-sweep-<study's hash>.json``: the first trial run that
reaches the server makes the parent, under a lock on that file, so trial runs started together make one; a
parent made by a process killed before it saved the file is found again by its tags.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Optional

from utils.files.owned import make_dirs, open_file, write_text
from utils.trackers.identity import plain_id
from utils.trackers.spool import FOLDER, SWEEP_PARENT

SWEEP_TAG, KEY_TAG, ROLE_TAG = "regtrain.sweep", "regtrain.sweep_key", "regtrain.role"


def sweep_key(study: str, store: str, experiment: str) -> str:
    """The parent run's key: the study in one MLflow store and experiment (12 hex digits, safe in a search filter)."""
    return hashlib.sha1("\0".join((study, store, experiment)).encode()).hexdigest()[:12]


def parent_file(folder: Path, key: str) -> Path:
    """Where the parent run's id of the sweep ``key`` names is kept: beside the sweep's runs (``folder``: their
    experiment's folder), one file a study and place (the same study logged to another store or experiment has a
    parent there)."""
    return folder / FOLDER / f"{SWEEP_PARENT}{key}.json"


def trial_tags(trial: Any, config: Dict[str, Any]) -> Dict[str, Any]:
    """The tags of a trial's run: the study, the trial's number, its parameters (``sweep.param.<key>``) and seed."""
    from utils.sweep.study import open_storage, trial_id

    storage = open_storage(trial.storage)
    params = storage.get_trial(trial_id(storage, trial.study, trial.number)).params
    return {
        "sweep.study": trial.study,
        "sweep.trial": trial.number,
        "sweep.seed": config.get("seed"),
        **{f"sweep.param.{key}": value for key, value in params.items()},
    }


def parent_run(client: Any, experiment_id: str, study: str, key: str, file: Path) -> str:
    """The id of the parent run of ``study`` (its ``sweep_key``) in ``experiment_id``: kept in ``file``, found by its
    tags, or made."""
    make_dirs(file.parent, file.parent)
    with open_file(file.parent, file.with_name(file.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # trial runs started together make one parent
        kept = read_parent(file, experiment_id)
        if kept is not None and sweeps_parent(client, kept, key):
            return kept
        query = f"tags.`{KEY_TAG}` = '{key}' and tags.`{ROLE_TAG}` = 'parent'"  # hex: no quoting to get wrong
        found = client.search_runs([experiment_id], query, max_results=1)
        if found:
            run_id = found[0].info.run_id
        else:
            tags = {SWEEP_TAG: study, KEY_TAG: key, ROLE_TAG: "parent"}
            run_id = client.create_run(experiment_id, tags=tags, run_name=f"sweep {study}").info.run_id
        write_text(
            file.parent,
            file,
            json.dumps({"run_id": run_id, "experiment_id": experiment_id, "study": study}),
            "free space",
        )
        return run_id


def sweeps_parent(client: Any, run_id: str, key: str) -> bool:
    """Whether MLflow run ``run_id`` is the parent run of the sweep ``key`` (its tag says so): the file that keeps its
    id lies in a folder others may hand over, and could name anyone's run; one that is not is never nested under."""
    from mlflow.exceptions import RestException

    try:
        return client.get_run(run_id).data.tags.get(KEY_TAG) == key
    except RestException as err:
        if err.error_code != "RESOURCE_DOES_NOT_EXIST":
            raise
        return False


def read_parent(file: Path, experiment_id: str) -> Optional[str]:
    """The parent run's id ``file`` keeps for ``experiment_id``; None where there is none (no file, or one left by a
    process killed while it wrote, or kept for an experiment deleted and made again): the tags find it, or it is made."""
    try:
        kept = json.loads(file.read_text())
    except (OSError, ValueError):
        return None
    run_id = kept.get("run_id") if isinstance(kept, dict) else None
    if not plain_id(run_id) or kept.get("experiment_id") != experiment_id:
        return None
    return run_id
