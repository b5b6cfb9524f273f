"""Weights & Biases as a tracker: one W&B run per run folder, its id chosen before it exists and kept in the spool's
identity, so every resume continues it (``wandb.init(id=..., resume="allow")``).

``mode`` ``offline`` (or ``WANDB_MODE=offline``) writes the run under ``dir`` (``WANDB_DIR``; the run folder's
``trackers/`` by default) for ``wandb sync`` later: a cluster without internet. A resumed offline run is a second
``offline-run-*-<id>`` folder of the same id holding the steps after the first one's last: ``wandb sync`` of
both gives one history, each step once. W&B needs steps in increasing order, which the spool keeps: a resume
never sends a step the run already has.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence

from utils.trackers.spool import Record, Spool


class WandbBackend:
    name = "wandb"

    def __init__(self, settings: Dict[str, Any]) -> None:
        # project, entity, mode, dir, group, name: what wandb.init takes (None: W&B's environment variables decide)
        self.settings = {key: value for key, value in settings.items() if value is not None}
        self.where = f"W&B ({self.settings.get('mode') or os.environ.get('WANDB_MODE') or 'online'})"
        self.run: Any = None
        self._spool: Optional[Spool] = None

    @classmethod
    def from_identity(cls, identity: Dict[str, Any]) -> "WandbBackend":
        return cls(identity.get("settings", {}))

    def identity(self) -> Dict[str, Any]:
        return {"backend": self.name, "settings": self.settings}

    def open(self, spool: Spool) -> None:
        import wandb

        self._spool = spool
        run_id = spool.identity.get("run_id")
        if run_id is None:
            run_id = wandb.util.generate_id()
            spool.save_identity(run_id=run_id)
        if self.settings.get("dir"):
            os.makedirs(self.settings["dir"], exist_ok=True)
        self.run = wandb.init(id=run_id, resume="allow", reinit="create_new", **self.settings)

    def send(self, records: Sequence[Record]) -> None:
        for record in records:
            if self.run is None and self._spool is not None and record.get("status") != "FINISHED":
                self.open(self._spool)  # a run that finished and was resumed after (records of both in a sync)
            if "metrics" in record:
                self.run.log(record["metrics"], step=record["step"])
            elif "params" in record:
                self.run.config.update(record["params"], allow_val_change=True)
            elif "tags" in record:
                self.run.summary.update(record["tags"])
            elif "artifact" in record:
                self.run.save(record["artifact"], base_path=os.path.dirname(record["artifact"]), policy="now")
            elif record.get("status") in ("FINISHED", "FAILED", "KILLED"):
                self.finish(0 if record["status"] == "FINISHED" else 1)

    def finish(self, exit_code: Optional[int] = 0) -> None:
        if self.run is not None:
            self.run.finish(exit_code=exit_code)
            self.run = None

    def close(self) -> None:
        self.finish(None)
