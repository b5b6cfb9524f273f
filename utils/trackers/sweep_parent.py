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
from typing import Any, Dict

from utils.atomic_write import write_text
from utils.trackers.spool import FOLDER, SWEEP_PARENT

SWEEP_TAG, ROLE_TAG = "regtrain.sweep", "regtrain.role"


def parent_file(experiment: Path, study: str) -> Path:
    """Where the parent run's id of ``study`` is kept: beside the sweep's runs, one file a study."""
    return experiment / FOLDER / f"{SWEEP_PARENT}{hashlib.sha1(study.encode()).hexdigest()[:12]}.json"


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


def parent_run(client: Any, experiment_id: str, study: str, file: Path) -> str:
    """The id of the sweep's parent run in ``experiment_id``: kept in ``file``, found by its tags, or made."""
    file = Path(file)
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(file.with_name(file.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # trial runs started together make one parent
        if file.is_file():
            return json.loads(file.read_text())["run_id"]
        query = f"tags.`{SWEEP_TAG}` = '{study}' and tags.`{ROLE_TAG}` = 'parent'"
        found = client.search_runs([experiment_id], query, max_results=1)
        if found:
            run_id = found[0].info.run_id
        else:
            tags = {SWEEP_TAG: study, ROLE_TAG: "parent"}
            run_id = client.create_run(experiment_id, tags=tags, run_name=f"sweep {study}").info.run_id
        write_text(file, json.dumps({"run_id": run_id, "experiment_id": experiment_id, "study": study}), "free space")
        return run_id
