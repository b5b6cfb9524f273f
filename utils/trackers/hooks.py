"""The trackers a config selects by name: ``hooks=[{name: mlflow}]`` and ``hooks=[{name: wandb}]``.

Their libraries are optional extras (``pip install -e ".[mlflow]"``, ``".[wandb]"``): naming a tracker whose library
is missing is one line naming the extra. Both honour their libraries' environment variables where an argument is
not given (``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME``; ``WANDB_MODE``, ``WANDB_DIR``, ``WANDB_PROJECT``...).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Dict, Optional

from utils.errors import ConfigError
from utils.registry import HOOKS
from utils.trackers.spool import Spool
from utils.trackers.tracker_hook import Tracker


def require(library: str, hook: str) -> None:
    if importlib.util.find_spec(library) is None:
        raise ConfigError(
            f"hook '{hook}' needs the {library} library, which is not installed: pip install -e \".[{hook}]\" "
            f"(or remove the hook from 'hooks')"
        )


def experiment_name(trainer: Any) -> str:
    return str(trainer.meta.config.get("experiment", {}).get("name") or "regtrain")


def run_name(trainer: Any, spool: Spool) -> str:
    """``<experiment.name>/<run folder>``: the name a tracker shows the run under."""
    return f"{experiment_name(trainer)}/{spool.folder.parent.name}"


@HOOKS.register(name="mlflow")
class MlflowTracker(Tracker):
    """MLflow: ``tracking_uri`` (else ``MLFLOW_TRACKING_URI``), ``experiment`` (else ``MLFLOW_EXPERIMENT_NAME``, else
    ``experiment.name``), ``run_name`` (else ``<experiment.name>/<run folder>``), ``log_checkpoints`` (upload
    best.pt after the test; off: the tag names its path)."""

    name = "mlflow"

    def __init__(
        self,
        tracking_uri: Optional[str] = None,
        experiment: Optional[str] = None,
        run_name: Optional[str] = None,
        log_checkpoints: bool = False,
        flush_timeout: float = 30.0,
    ) -> None:
        require("mlflow", "mlflow")
        self.tracking_uri = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
        if not self.tracking_uri:
            raise ConfigError(
                "hook 'mlflow' needs a tracking URI: hooks=[{name: mlflow, tracking_uri: http://HOST:5000}] "
                "or the environment variable MLFLOW_TRACKING_URI"
            )
        self.experiment, self.run_name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME"), run_name
        super().__init__(log_checkpoints, flush_timeout)

    def backend(self, trainer: Any, spool: Spool) -> Any:
        from utils.trackers.mlflow_backend import MlflowBackend

        if spool.identity.get("backend") == self.name:  # the tracker run lives where it was made
            return MlflowBackend.from_identity(spool.identity)
        parent = self.sweep_parent(trainer, spool)
        experiment = self.experiment or experiment_name(trainer)
        return MlflowBackend(self.tracking_uri, experiment, self.run_name or run_name(trainer, spool), parent)

    def sweep_parent(self, trainer: Any, spool: Spool) -> Optional[Dict[str, Any]]:
        trial = getattr(trainer.meta, "trial", None)
        if trial is None:
            return None
        from utils.trackers.sweep_parent import parent_file

        return {"study": trial.study, "file": str(parent_file(spool.folder.parent.parent, trial.study))}


@HOOKS.register(name="wandb")
class WandbTracker(Tracker):
    """Weights & Biases: ``project`` (else ``WANDB_PROJECT``, else ``experiment.name``), ``entity``, ``mode``
    (``online``, ``offline``; else ``WANDB_MODE``), ``dir`` (else ``WANDB_DIR``, else the run folder's
    ``trackers/``), ``log_checkpoints``. A sweep's runs are one group (the study's name)."""

    name = "wandb"

    def __init__(
        self,
        project: Optional[str] = None,
        entity: Optional[str] = None,
        mode: Optional[str] = None,
        dir: Optional[str] = None,
        log_checkpoints: bool = False,
        flush_timeout: float = 30.0,
    ) -> None:
        require("wandb", "wandb")
        if mode not in (None, "online", "offline", "disabled"):
            raise ConfigError(f"hook 'wandb': mode '{mode}' is none of online, offline, disabled")
        self.project, self.entity, self.mode, self.dir = project, entity, mode, dir
        super().__init__(log_checkpoints, flush_timeout)

    def backend(self, trainer: Any, spool: Spool) -> Any:
        from utils.trackers.wandb_backend import WandbBackend

        if spool.identity.get("backend") == self.name:
            return WandbBackend.from_identity(spool.identity)
        trial = getattr(trainer.meta, "trial", None)
        settings = {
            "project": self.project or os.environ.get("WANDB_PROJECT") or experiment_name(trainer),
            "entity": self.entity,
            "mode": self.mode,
            "dir": self.dir or os.environ.get("WANDB_DIR") or str(spool.folder),
            "name": run_name(trainer, spool),
            "group": trial.study if trial is not None else None,
        }
        return WandbBackend(settings)
