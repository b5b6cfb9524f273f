"""An experiment's ``latest``: the link to its newest training run, replaced atomically and put back when
the start that moved it fails (``utils/run/folder.py`` moves it)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from utils.files.owned import point_link, remove

LATEST = "latest"


def point_latest(experiment: Path, name: str) -> None:
    """``latest`` -> ``name``, replaced atomically (a symlink renamed over the old one): the one link inside an
    experiment folder that the framework makes, to a name beside it (``utils/files/owned.py``)."""
    point_link(experiment, experiment / LATEST, name)


def restore_latest(experiment: Path, before: Optional[str], ours: str) -> None:
    """``latest`` back to ``before`` (removed when there was none), unless another run took it after ``ours``."""
    link = experiment / LATEST
    if not link.is_symlink() or os.readlink(link) != ours:
        return
    if before is None:
        remove(experiment, link)  # the link itself
    else:
        point_latest(experiment, before)
