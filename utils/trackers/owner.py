"""Which run folder a tracker's spool belongs to: the one it was made in, named in its identity (``folder``).

A copied run folder holds the spool and identity of the folder it was copied from: resumed as they are, it would
write its steps into that folder's tracker run, beside the other's (the same steps, other values), and a W&B identity
would send it to work in the other folder's ``trackers/wandb``. So where the folder a spool names still holds that
spool (the same folder id), this one is a copy: its spool is set aside (kept, under ``trackers/copied-<its folder
id>/``: the other folder has the same records) and the resumed copy gets a tracker run of its own, tagged with the
one its checkpoint was logged to (``tracker_hook.py``); ``sync`` refuses to send it. Where that folder is gone or
holds another spool, this one was moved there (or is the same storage mounted elsewhere): it keeps its tracker run,
and its identity is made this folder's.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Optional

from utils.files.owned import make_dirs, replace
from utils.trackers.spool import Spool

log = logging.getLogger(__name__)

FOLDER_KEY = "folder"  # the identity's: the run folder the spool was made in (resolved)
ASIDE = "copied-"  # trackers/copied-<folder id>/: a spool made elsewhere, set aside


def here(run: Path) -> str:
    return str(Path(run).resolve())


def made_elsewhere(spool: Spool, run: Path) -> Optional[str]:
    """The folder ``spool`` (of the run folder ``run``) was made in, where that folder still holds it: this one is a
    copy. None where the spool is this folder's: made here, made before identities named their folder (``claim``),
    or moved here (its identity is made this folder's now)."""
    made = spool.identity.get(FOLDER_KEY)
    if made is None or made == here(run):
        return None
    there = Path(made) / spool.folder.name / spool.identity_path.name
    if not same_file(there, spool.identity_path) and holds(there, spool):
        return made
    moved_here(spool, made, run)  # gone from there (moved; a copy whose original is gone is the same), or the same
    return None  # storage under another path (a mount)


def holds(identity: Path, spool: Spool) -> bool:
    """Whether the identity file ``identity`` (of the folder ``spool`` names) is ``spool``'s tracker run's: the same
    folder id. Only a file that is not there, or another run's, says no: one that cannot be read counts as held (a
    copy gets a tracker run of its own: the safe side)."""
    try:
        there = json.loads(identity.read_text())
    except (FileNotFoundError, NotADirectoryError):
        return False
    except (OSError, ValueError):
        return True
    return not isinstance(there, dict) or there.get("folder_id") == spool.identity.get("folder_id")


def same_file(one: Path, other: Path) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def moved_here(spool: Spool, made: str, run: Path) -> None:
    """Make the identity of a spool moved from the folder ``made`` this folder's (a W&B folder inside it moved too)."""
    settings = dict(spool.identity.get("settings") or {})
    old = settings.get("dir")
    if isinstance(old, str) and (old == made or old.startswith(made + os.sep)):
        settings["dir"] = here(run) + old[len(made) :]
    log.info("tracker %s: this run folder was moved from %s; its tracker run continues", spool.name, made)
    spool.save_identity(**{FOLDER_KEY: here(run)}, **({"settings": settings} if settings else {}))


def claim(spool: Spool, run: Path) -> None:
    """Name ``run`` as the folder of ``spool``'s identity (a new one, or one written before identities named it)."""
    if spool.identity.get(FOLDER_KEY) is None:
        spool.save_identity(**{FOLDER_KEY: here(run)})


def set_aside(spool: Spool, made: str) -> Path:
    """Move the spool's two files (made in the folder ``made``) under ``trackers/copied-<its folder id>/``; where."""
    spool.close()
    aside = spool.folder / f"{ASIDE}{spool.identity.get('folder_id') or 'unknown'}"
    root = spool.folder.parent  # the run folder: never through a link below it (utils/files/owned.py)
    make_dirs(root, aside)
    for path in (spool.records_path, spool.identity_path):
        if path.exists():
            replace(root, path, aside / path.name)
    log.warning(
        "tracker %s: this run folder's tracker records were made in %s (this one is a copy: that folder holds them "
        "too); they stay in %s, and this run gets a tracker run of its own",
        spool.name,
        made,
        aside,
    )
    return aside
