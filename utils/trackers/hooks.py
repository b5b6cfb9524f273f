"""The trackers a config selects by name: ``hooks=[{name: mlflow}]`` and ``hooks=[{name: wandb}]``.

Their libraries are optional extras (``pip install -e ".[mlflow]"``, ``".[wandb]"``): naming a tracker whose library
is missing is one line naming the extra. Both honour their libraries' environment variables where an argument is
not given (``MLFLOW_TRACKING_URI``, ``MLFLOW_EXPERIMENT_NAME``; ``WANDB_MODE``, ``WANDB_DIR``, ``WANDB_PROJECT``...).
A password in a tracking URI is a secret (``utils/secret_text.py``): a run folder keeps it masked, and a tracking URI
read back masked (a config.yaml given as ``--config``) takes it again from ``MLFLOW_TRACKING_URI``.
"""

from __future__ import annotations

import netrc
import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

from utils.errors import ConfigError
from utils.registry import HOOKS
from utils.secret_text import hide, masked, needs_again, unmasked
from utils.trackers.extras import require
from utils.trackers.mlflow_backend import checked_uri
from utils.trackers.spool import Spool
from utils.trackers.tracker_hook import Tracker


def wandb_login() -> bool:
    """Whether W&B can log online: an API key in the environment or in ~/.netrc (where 'wandb login' puts it)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return (
            netrc.netrc().authenticators(os.environ.get("WANDB_BASE_URL", "api.wandb.ai").split("//")[-1]) is not None
        )
    except (OSError, netrc.NetrcParseError):
        return False


def experiment_name(trainer: Any) -> str:
    return str(trainer.meta.config.get("experiment", {}).get("name") or "regtrain")


def run_name(trainer: Any, spool: Spool) -> str:
    """``<experiment.name>/<run folder>``: the name a tracker shows the run under."""
    return f"{experiment_name(trainer)}/{spool.folder.parent.resolve().name}"  # run_003, also through 'latest'


# What places a tracker run (its store and experiment, W&B's project, entity, mode and folder): a resume cannot move
# it. Its name and group only label it, and follow the folder's name (a resume through ``latest`` names it so).
PLACES = {"mlflow": ("tracking_uri", "experiment"), "wandb": ("project", "entity", "mode", "dir")}


def shown(value: Any) -> Any:
    """A setting as it is compared and said: a password in it masked (the identity keeps it so; an older one, whole)."""
    return masked(value) if isinstance(value, str) else value


def unchanged(hook: str, spool: Spool, made: Dict[str, Any], now: Dict[str, Any], keys: Tuple[str, ...]) -> None:
    """ConfigError where the hook's settings of ``now`` place the tracker run elsewhere than it was ``made``: a
    resume continues that run where it lives."""
    changed = [key for key in keys if shown(made.get(key)) != shown(now.get(key))]
    if not changed:
        return
    was = ", ".join(f"{key}={shown(made.get(key))!r}" for key in changed)
    given = ", ".join(f"{key}={shown(now.get(key))!r}" for key in changed)
    raise ConfigError(
        f"hook '{hook}': this run's tracker run {spool.identity.get('run_id')} was made with {was} and a resume "
        f"continues it there, but the hook now gives {given}: give the hook (or its environment variables) the "
        f"run's settings again, or, for a new tracker run, move {spool.identity_path.name} and "
        f"{spool.records_path.name} out of {spool.folder}"
    )


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
        require("mlflow", "hook 'mlflow'", " (or remove the hook from 'hooks')")
        given = hide(os.environ.get("MLFLOW_TRACKING_URI"))  # a password in it: a Secret (utils/secret_text.py)
        where = unmasked(tracking_uri, given) if tracking_uri else given
        if tracking_uri and where is None:  # read back masked (a run folder's config.yaml), and not given again
            raise ConfigError(needs_again("hook 'mlflow': tracking_uri", tracking_uri, "MLFLOW_TRACKING_URI"))
        self.tracking_uri = checked_uri(where)
        self.experiment, self.run_name = experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME"), run_name
        super().__init__(log_checkpoints, flush_timeout)

    def backend(self, trainer: Any, spool: Spool) -> Any:
        from utils.trackers.mlflow_backend import MlflowBackend

        now = {
            "tracking_uri": self.tracking_uri,
            "experiment": self.experiment or experiment_name(trainer),
            "run_name": self.run_name or run_name(trainer, spool),
        }
        if spool.identity.get("run_id"):  # the tracker run lives where it was made
            unchanged(self.name, spool, spool.identity, now, PLACES["mlflow"])
            return MlflowBackend.from_identity(spool.identity, self.tracking_uri)  # the user's, with its password
        return MlflowBackend(**now, parent=self.sweep_parent(trainer))

    def sweep_parent(self, trainer: Any) -> Optional[Dict[str, Any]]:
        trial = getattr(trainer.meta, "trial", None)
        if trial is None:
            return None
        return {"study": trial.study}  # its parent run's file: beside the sweep's runs (MlflowBackend.open)


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
        require("wandb", "hook 'wandb'", " (or remove the hook from 'hooks')")
        if mode not in (None, "online", "offline", "disabled"):
            raise ConfigError(f"hook 'wandb': mode '{mode}' is none of online, offline, disabled")
        if (mode or os.environ.get("WANDB_MODE") or "online") == "online" and not wandb_login():
            raise ConfigError(
                "hook 'wandb' in online mode needs a W&B login: run 'wandb login' (or set WANDB_API_KEY), or log "
                "offline with hooks=[{name: wandb, mode: offline}] and 'wandb sync' later"
            )
        self.project, self.entity, self.mode, self.dir = project, entity, mode, dir
        super().__init__(log_checkpoints, flush_timeout)

    def backend(self, trainer: Any, spool: Spool) -> Any:
        from utils.trackers.wandb_backend import WandbBackend

        trial = getattr(trainer.meta, "trial", None)
        settings = {
            "project": self.project or os.environ.get("WANDB_PROJECT") or experiment_name(trainer),
            "entity": self.entity,
            # the mode W&B runs in, also where WANDB_MODE gives it: part of where the run lives (a resume under
            # WANDB_MODE=disabled would count its steps kept while no W&B run holds them)
            "mode": self.mode or os.environ.get("WANDB_MODE") or "online",
            "dir": str(Path(self.dir or os.environ.get("WANDB_DIR") or spool.folder).resolve()),  # sync: anywhere
            "name": run_name(trainer, spool),
            "group": trial.study if trial is not None else None,
        }
        backend = WandbBackend(settings)
        if spool.identity.get("run_id"):  # the W&B run continues where it was made
            made = dict(spool.identity.get("settings") or {})
            made["dir"] = str(Path(made["dir"]).resolve()) if made.get("dir") else None
            # an identity of an earlier version kept no mode given through WANDB_MODE: what it was is not known
            made.setdefault("mode", backend.settings["mode"])
            unchanged(self.name, spool, made, backend.settings, PLACES["wandb"])
            return WandbBackend.from_identity(spool.identity)
        return backend
