"""A run folder's tracker identity (``trackers/mlflow.json``) is a file others hand over: every field made hostile
by ``fields.py`` is read by the spool as a resume or ``sync`` opens it, and is one line (the identity refused) or a
correct read, never a traceback, and nothing is written outside the run folder."""

from __future__ import annotations

import json
from pathlib import Path

from tests.hostile.fields import Format, check_format, register
from tests.trackers.identities import MLFLOW

RECORDS = b'{"t": 1, "step": 0, "metrics": {"train/loss": 1.5}}\n'


def make(folder: Path) -> Path:
    trackers = folder / "run_001" / "trackers"
    trackers.mkdir(parents=True)
    (trackers / "mlflow.jsonl").write_bytes(RECORDS)
    identity = {**MLFLOW, "folder": str(folder / "run_001"), "run_id": "a" * 32, "experiment_id": "1", "sent": 0}
    (trackers / "mlflow.json").write_text(json.dumps(identity))
    return trackers / "mlflow.json"


def read(path: Path, own: Path) -> None:
    from utils.trackers.spool import Spool

    spool = Spool(path.parent, "mlflow")  # reads the identity, scans the records against its offsets
    try:
        spool.pending(spool.sent)
    finally:
        spool.close()


IDENTITY = register(Format("tracker identity", make, read))


def test_every_identity_field_hostile_is_one_line_or_a_correct_read(tmp_path):
    assert check_format(IDENTITY, tmp_path) > 200
