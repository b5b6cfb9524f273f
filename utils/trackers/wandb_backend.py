"""Weights & Biases as a tracker: one W&B run per run folder, its id chosen before it exists and kept in the spool's
identity, so every resume continues it (``wandb.init(id=..., resume="allow")``).

``mode`` ``offline`` (or ``WANDB_MODE=offline``) writes the run under ``dir`` (``WANDB_DIR``; the run folder's
``trackers/`` by default) for ``wandb sync`` later: a cluster without internet. W&B's own process writes what it is
given some time later, and a kill -9 of the run takes it down too: what it held is lost. So the spool counts
records as kept (``sent``) only once the W&B run finished, and a process that continues after a kill gives W&B
again everything after the last finished part; an offline folder of this run id that no finish closed is the
killed process's and is removed first (its records are all in the new one). Each finished part of the run is an
``offline-run-*-<id>`` folder holding the steps after the previous one's: ``wandb sync`` of them gives one
history, each step once (W&B takes steps in increasing order, which the spool keeps).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

from utils.files.owned import make_dirs, remove_tree
from utils.trackers.spool import Record, Spool

log = logging.getLogger(__name__)


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

    @staticmethod
    def outages() -> Tuple[type, ...]:
        """What W&B raises when it cannot be reached (any other error is a bug, said with its traceback)."""
        import wandb.errors
        from wandb.sdk.mailbox.mailbox_handle import ServerResponseError

        return (OSError, wandb.errors.Error, ServerResponseError)

    @staticmethod
    def failure(err: BaseException) -> str:
        """``outage`` (W&B's servers did not answer; or the run is still held by the W&B process of a run killed a
        moment ago, which ends within seconds) or ``refused`` (a login, a project, a setting it will not take)."""
        import wandb.errors

        held = "is in use" in str(err)
        return "outage" if held or isinstance(err, (OSError, wandb.errors.CommError)) else "refused"

    def open(self, spool: Spool) -> None:
        import wandb
        from wandb.sdk.lib.runid import generate_id

        self._spool = spool
        run_id = spool.identity.get("run_id")
        if run_id is None:
            run_id = generate_id()
            spool.save_identity(run_id=run_id)
        if self.settings.get("dir"):
            make_dirs(self.settings["dir"], self.settings["dir"])
            self._drop_unfinished(Path(self.settings["dir"]), run_id, spool.identity.get("finished", []))
        # console off: W&B would wrap this process's stdout, where the lines scripts read go
        quiet = wandb.Settings(console="off", silent=True, disable_git=True, save_code=False)
        self.run = wandb.init(id=run_id, resume="allow", reinit="create_new", settings=quiet, **self.settings)

    @staticmethod
    def _drop_unfinished(folder: Path, run_id: str, finished: List[str]) -> None:
        """Remove the offline folders of ``run_id`` that no finish closed: a killed process's, resent whole now.
        ``folder`` is the user's (a resume: the hook's ``dir``, compared with the identity's) or lies inside the run
        folder (``sync``: ``destinations.own_wandb_dir``)."""
        own = folder.resolve() / "wandb"  # reached through no link: a linked wandb/ or run folder is another's
        for offline in sorted((folder / "wandb").glob(f"offline-run-*-{run_id}")):
            if offline.name not in finished and offline.is_dir() and offline.resolve() == own / offline.name:
                log.info("tracker wandb: %s was not finished (the process was killed); its records go again", offline)
                remove_tree(folder, offline)  # no link on the way below ``folder``; a link inside goes as a link

    def send(self, records: Sequence[Record]) -> bool:
        """Give ``records`` to W&B; kept for good once a status record finished the run."""
        kept = False
        for record in records:
            if self.run is None and record.get("status") != "FINISHED":
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
                kept = self.finish(0 if record["status"] == "FINISHED" else 1)
        return kept

    def finish(self, exit_code: Optional[int] = 0) -> bool:
        """Finish the W&B run (its files written whole); whether there was one."""
        if self.run is None:
            return False
        written = Path(self.run.dir).parent
        offline = written.name  # offline-run-<time>-<id>, or run-<time>-<id> online
        self.run.finish(exit_code=exit_code)
        self.run = None
        if offline.startswith("offline-"):  # where its files went, and how they reach W&B
            log.info(
                "tracker wandb (offline): the run is in %s; send it from a machine online: wandb sync %s",
                written,
                written,
            )
        if self._spool is not None:
            self._spool.save_identity(finished=[*self._spool.identity.get("finished", []), offline])
        return True

    def close(self) -> bool:
        """Finish the W&B run; whether that kept what it was given (a run this process opened)."""
        return self.finish(None)
