"""A resumed run whose folder holds a tracker's records, started without that tracker's hook: the records would
wait for good while the tracker run stays as the earlier process left it. Said once, with the way out."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, Sequence

from utils.trackers.spool import FOLDER, Spool, tracker_names

log = logging.getLogger(__name__)


def warn_left_behind(run: Path, hooks: Sequence[Dict[str, Any]]) -> None:
    """Warn for each tracker of ``run``'s ``trackers/`` that ``hooks`` (the config's entries) leaves out."""
    named = {str(entry.get("name")) for entry in hooks if entry.get("enabled", True) is not False}
    for name in tracker_names(Path(run) / FOLDER):
        if name in named:
            continue
        waiting = Spool(Path(run) / FOLDER, name).waiting()
        log.warning(
            "this run logged to %s (its trackers/%s.json), but this resume has no hooks=[{name: %s, ...}]: its steps from "
            "here on are not logged there%s; repeat the hook as the run's config.yaml has it to continue the tracker run",
            name,
            name,
            name,
            f", and {waiting} record(s) wait (python -m utils.trackers sync {run} sends them)" if waiting else "",
        )
