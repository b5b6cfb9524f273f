"""Which run folder a tracker's spool belongs to: the one it was made in, named in its identity (``folder``).

A copied (or moved) run folder holds the spool and identity of the folder it was copied from: resumed as they are,
it would write its steps into that folder's tracker run, beside the other's (the same steps, other values), and a W&B
identity would send it to work in the other folder's ``trackers/wandb``. So a spool made in another folder is set
aside (kept, under ``trackers/copied-<its folder id>/``) and the resumed copy gets a tracker run of its own, tagged
with the one its checkpoint was logged to (``tracker_hook.py``); ``sync`` refuses to send it.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Optional

from utils.trackers.spool import Spool

log = logging.getLogger(__name__)

FOLDER_KEY = "folder"  # the identity's: the run folder the spool was made in (resolved)
ASIDE = "copied-"  # trackers/copied-<folder id>/: a spool made elsewhere, set aside


def here(run: Path) -> str:
    return str(Path(run).resolve())


def made_elsewhere(spool: Spool, run: Path) -> Optional[str]:
    """The folder ``spool`` (of the run folder ``run``) was made in, where that is another; None where it is this
    one, or where the identity predates the ``folder`` key (it is claimed for this folder: ``claim``)."""
    made = spool.identity.get(FOLDER_KEY)
    return made if made is not None and made != here(run) else None


def claim(spool: Spool, run: Path) -> None:
    """Name ``run`` as the folder of ``spool``'s identity (a new one, or one written before identities named it)."""
    if spool.identity.get(FOLDER_KEY) is None:
        spool.save_identity(**{FOLDER_KEY: here(run)})


def set_aside(spool: Spool, made: str) -> Path:
    """Move the spool's two files (made in the folder ``made``) under ``trackers/copied-<its folder id>/``; where."""
    spool.close()
    aside = spool.folder / f"{ASIDE}{spool.identity.get('folder_id') or 'unknown'}"
    aside.mkdir(parents=True, exist_ok=True)
    for path in (spool.records_path, spool.identity_path):
        if path.exists():
            os.replace(path, aside / path.name)
    log.warning(
        "tracker %s: this run folder's tracker records were made in %s (it is a copy, or was moved); they stay in "
        "%s, and this run gets a tracker run of its own",
        spool.name,
        made,
        aside,
    )
    return aside
