"""The hook every tracker is: what a run gives its tracker, and when (rank 0 only).

- When training starts (or, in ``--mode test``, with the test): the resolved config as params (flattened keys),
  tags naming the run folder (and, in a sweep, the trial, its parameters and seed); a resumed run sets the
  tracker run's status back to RUNNING.
- Every scalar the run writer writes (``train/loss``, ``train/lr``, ``train_epoch/*``, ``val/*``, ``test/*``: what
  TensorBoard gets, ``metrics.jsonl``'s rows among them) at the step it is written at, each (metric, step) once:
  the steps a resumed run replays after its checkpoint are left out where the spool has them already.
- After each validation, the best checkpoint's path as a tag once it exists; after the test, the test line.
- ``close``: the status (FINISHED after the test, else FAILED), then the sender gets ``flush_timeout`` seconds.

Records go to the spool (``spool.py``) and from there to the tracker in a thread (``sender.py``): logging costs the
training loop one line written to a file. The tracker run's id lives in the spool's identity (``trackers/`` of the
run folder) and in every checkpoint (``state_dict``).
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path
from typing import Any, Dict, Optional

from utils.checkpoint.sharded_layout import BEST as SHARDED_BEST
from utils.checkpoint.store import BEST
from utils.errors import ConfigError, name_list
from utils.hook import Hook
from utils.hook.run_summary import flat_config
from utils.log import format_metrics
from utils.run.folder import RunFolder
from utils.trackers.owner import claim, here, made_elsewhere, set_aside
from utils.trackers.sender import Backend, Sender
from utils.trackers.spool import FOLDER, Spool

log = logging.getLogger(__name__)


class Tracker(Hook):
    """Base of the tracker hooks; a subclass names itself (``name``) and makes its ``backend``."""

    name = "tracker"
    priority = 95  # after the hooks that may change what is logged

    def __init__(self, log_checkpoints: bool = False, flush_timeout: float = 30.0, interval: float = 1.0) -> None:
        if not flush_timeout >= 0:
            raise ConfigError(f"hook '{self.name}': flush_timeout must be >= 0 seconds, got {flush_timeout}")
        self.log_checkpoints, self.flush_timeout, self.interval = log_checkpoints, flush_timeout, interval
        self.spool: Optional[Spool] = None
        self.sender: Optional[Sender] = None
        self.run_path: Optional[Path] = None
        self.from_checkpoint: Optional[Dict[str, Any]] = None  # load_state_dict's, until the spool opens
        self.best_tagged = False
        self.tested = False

    # -- what a subclass gives ------------------------------------------------------------------

    def backend(self, trainer: Any, spool: Spool) -> Backend:
        raise NotImplementedError

    # -- events ----------------------------------------------------------------------------------

    def before_train(self, trainer: Any) -> None:
        self._open(trainer)

    def after_validation(self, trainer: Any, metrics: Dict[str, float]) -> None:
        best = self._best() if self.spool is not None and not self.best_tagged else None
        if best is not None:
            self.spool.append({"tags": {"regtrain.best_checkpoint": str(best)}})
            self.best_tagged = True

    def _best(self) -> Optional[Path]:
        """The run's best checkpoint once it exists: ``best.pt``, or the folder ``best.dcp`` of ``dist.mode=fsdp``."""
        found = [RunFolder(self.run_path).checkpoints / name for name in (BEST, SHARDED_BEST)]
        return next((path for path in found if path.exists()), None)

    def after_test(self, trainer: Any, metrics: Dict[str, float]) -> None:
        self._open(trainer)  # --mode test: its first event
        if self.spool is None:
            return
        self._values(trainer.state.step, "test", metrics)  # the writer gave them already, unless it was muted
        self.spool.append({"tags": {"regtrain.test": f"test: {format_metrics(metrics)}"}})
        self.tested = True
        best = self._best() if self.log_checkpoints else None
        if best is not None and best.is_file():
            # relative to the run folder: the record names the file wherever the folder is moved (records.py)
            self.spool.append({"artifact": os.path.relpath(best.resolve(), self.spool.run.resolve())})
        elif best is not None:  # a sharded checkpoint is a folder of shards: its tag names it
            log.warning(
                "tracker %s: log_checkpoints uploads checkpoint files; %s is a folder, not uploaded", self.name, best
            )

    def close(self) -> None:
        if self.spool is None:
            return
        self.spool.append({"status": "FINISHED" if self.tested else "FAILED"})
        self.spool.close()
        self.sender.close(self.flush_timeout, self.run_path)
        self.spool = None

    def state_dict(self) -> Dict[str, Any]:
        """The tracker run this checkpoint's steps were logged to (its id, once the tracker made it)."""
        identity = self.spool.identity if self.spool is not None else (self.from_checkpoint or {})
        return {"run_id": identity.get("run_id"), "folder_id": identity.get("folder_id")}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.from_checkpoint = dict(state)

    # -- the spool -------------------------------------------------------------------------------

    def _open(self, trainer: Any) -> None:
        run = getattr(trainer.writer, "run", None)
        if self.spool is not None or run is None:  # open already, or not rank 0
            return
        self.run_path = run.path
        spool = Spool(run.path / FOLDER, self.name)
        made = made_elsewhere(spool, run.path)
        if made is not None:  # a copied folder: the records are the other folder's tracker run's
            set_aside(spool, made)
            spool = Spool(run.path / FOLDER, self.name)
        fresh = not spool.identity
        if fresh:  # a new tracker run, also for a resume whose folder has no spool (a copy, trackers/ removed)
            spool.save_identity(folder_id=uuid.uuid4().hex)
        claim(spool, run.path)
        backend = self.backend(trainer, spool)
        if fresh or "run_id" not in spool.identity:  # the settings of now, while no tracker run exists yet
            spool.save_identity(**backend.identity())
        params = flat_config(trainer.meta.config)
        if spool.params is None:
            spool.append({"params": params})
            spool.append(
                {"tags": {"regtrain.run_folder": here(run.path), **self._provenance(), **self.sweep_tags(trainer)}}
            )
        else:
            self._resumed(spool, params, trainer.state.step)
        trainer.writer.listen(self._on_scalars)
        self.spool = spool
        self.sender = Sender(spool, backend, self.interval).start()

    def _provenance(self) -> Dict[str, Any]:
        """A new tracker run of a resumed run names the tracker run its checkpoint was logged to (its id, and the folder
        id it is tagged with, ``regtrain.folder_id``): a copy of a run,
        a checkpoint resumed into a new folder, or a run whose trackers/ was removed gets a tracker run of its own
        (the steps it replays would repeat the other's)."""
        earlier = self.from_checkpoint or {}
        tags = {
            "regtrain.resumed_from": earlier.get("run_id"),
            "regtrain.resumed_from_folder_id": earlier.get("folder_id"),
        }
        return {key: value for key, value in tags.items() if value}  # the run id once the tracker had made it

    def _resumed(self, spool: Spool, params: Dict[str, Any], step: int) -> None:
        """A resumed run: the tracker run is RUNNING again; a changed config is said, and kept as a tag (a tracker
        keeps a param's first value: MLflow refuses another)."""
        spool.append({"status": "RUNNING"})
        changed = sorted(key for key in set(params) | set(spool.params) if params.get(key) != spool.params.get(key))
        if not changed:
            return
        values = "; ".join(f"{key}={params.get(key)!r}" for key in changed)
        spool.append({"tags": {f"regtrain.changed_at_step_{step}": values}})
        logged = max(spool.last_step.values(), default=-1)
        held = (
            f"; the tracker holds steps {step + 1}..{logged} from before the change and keeps them (each step is "
            "logged once), later steps are the changed run's"
            if logged > step
            else ""
        )
        log.warning(
            "tracker %s: this resume changed %s; the tracker run's params stay the first ones, the new values are its "
            "tag regtrain.changed_at_step_%d%s",
            self.name,
            name_list(changed, show=8),
            step,
            held,
        )

    def sweep_tags(self, trainer: Any) -> Dict[str, Any]:
        trial = getattr(trainer.meta, "trial", None)
        if trial is None:
            return {}
        from utils.trackers.sweep_parent import trial_tags

        return trial_tags(trial, trainer.meta.config)

    def _on_scalars(self, step: int, prefix: str, values: Dict[str, Any]) -> None:
        if self.spool is not None:  # closed: the writer may still write (its own close comes later)
            self._values(step, prefix, values)

    def _values(self, step: int, prefix: str, values: Dict[str, Any]) -> None:
        new = self.spool.new_values(step, {f"{prefix}/{key}": value for key, value in values.items()})
        if new:
            self.spool.append({"step": step, "metrics": new})
