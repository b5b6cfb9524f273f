"""The trackers' libraries are optional extras (``pip install -e ".[mlflow]"``, ``".[wandb]"``): one line names the
extra where one is missing (a hook at start; ``sync`` for a run that logged to it). Imports nothing heavy."""

from __future__ import annotations

import importlib.util

from utils.errors import ConfigError


def require(library: str, needed_by: str, way_out: str = "") -> None:
    """ConfigError naming the extra when ``library`` (also the extra's name) is not installed; ``needed_by`` says
    what needs it (``hook 'mlflow'``, or a run's identity file), ``way_out`` another fix."""
    if importlib.util.find_spec(library) is None:
        raise ConfigError(
            f'{needed_by} needs the {library} library, which is not installed: pip install -e ".[{library}]"' + way_out
        )
