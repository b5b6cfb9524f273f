"""A resumed run whose folder holds a tracker's records, started without that tracker's hook: the records would
wait for good while the tracker run stays as the earlier process left it. Said once, with the way out."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Sequence

from utils.trackers.spool import FOLDER, Spool

log = logging.getLogger(__name__)


def warn_left_behind(run: Path, hooks: Sequence[Dict[str, Any]]) -> None:
    """Warn for each tracker of ``run``'s ``trackers/`` that ``hooks`` (the config's entries) leaves out."""
    named = {str(entry.get("name")) for entry in hooks if entry.get("enabled", True) is not False}
    for identity in sorted((Path(run) / FOLDER).glob("*.json")):
        name = identity.stem
        if name in named or name.startswith("mlflow-sweep-"):
            continue
        waiting = Spool(identity.parent, name).waiting()
        log.warning(
            "this run logged to %s (its trackers/%s), but this resume has no hooks=[{name: %s, ...}]: its steps from "
            "here on are not logged there%s; repeat the hook as the run's config.yaml has it to continue the tracker run",
            name,
            identity.name,
            name,
            f", and {waiting} record(s) wait (python -m utils.trackers sync {run} sends them)" if waiting else "",
        )
