"""What an MLflow server holds of a run folder's tracker run: its id, its metric histories, params and tags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Tuple

History = Dict[str, List[Tuple[int, float]]]


def run_id(run: Path) -> str:
    return json.loads((run / "trackers" / "mlflow.json").read_text())["run_id"]


def histories(uri: str, run_id: str) -> History:
    """Every metric's history as the server returns it: (step, value) in the order logged."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    keys = client.get_run(run_id).data.metrics
    return {key: [(m.step, m.value) for m in client.get_metric_history(run_id, key)] for key in keys}
