"""A tracker run's identity, ``trackers/<name>.json``, read back and checked in one place.

Its fields go into a tracker's queries and files (MLflow search filters, W&B file globs, ``wandb.init``'s
arguments) and into the offsets the spool is read at, so each is checked for its type where it is present, and
those the backend it names needs for sending (``REQUIRED``) must be there. Anything else is one ``OutputError``
line naming the file and the way out (restore it, or start a new tracker run), never a traceback later.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

from utils.errors import OutputError
from utils.files.names import plain_name
from utils.trackers.records import is_int

PLAIN_ID = re.compile(r"[A-Za-z0-9_-]+")
WANDB_SETTINGS = ("project", "entity", "mode", "dir", "name", "group")  # what wandb_backend gives wandb.init
REQUIRED = {"mlflow": ("tracking_uri", "experiment", "run_name"), "wandb": ("settings",)}
AFTER_BACKEND = ("run_id", "experiment_id", "parent_run_id", "finished")  # saved once the backend's fields are


def plain_id(value: Any) -> bool:
    return isinstance(value, str) and PLAIN_ID.fullmatch(value) is not None


def string(value: Any) -> bool:
    return isinstance(value, str)


def wandb_settings(value: Any) -> bool:
    return isinstance(value, dict) and all(key in WANDB_SETTINGS and string(item) for key, item in value.items())


def finished_parts(value: Any) -> bool:
    return isinstance(value, list) and all(plain_name(item) for item in value)


IDS = ("run_id", "folder_id", "experiment_id", "parent_run_id")  # in MLflow search filters and W&B file globs
STRINGS = ("tracking_uri", "experiment", "run_name", "backend", "folder")

# each field's check, and what it must be (for the message)
FIELDS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    "sent": (lambda value: is_int(value) and value >= 0, "a byte offset (an integer >= 0)"),
    **{key: (plain_id, "an id (letters, digits, '-', '_')") for key in IDS},
    **{key: (string, "a string") for key in STRINGS},
    "settings": (wandb_settings, f"a mapping of {', '.join(WANDB_SETTINGS)} to strings"),
    "finished": (finished_parts, "a list of folder names"),
}


def problem(identity: Any, path: Path) -> Optional[str]:
    """What is wrong with ``identity``, the content of the identity file ``path``; None when nothing is."""
    if not isinstance(identity, dict):
        return "holds no JSON object"
    for key, (check, what) in FIELDS.items():
        if key in identity and not check(identity[key]):
            return f"has {key}={json.dumps(identity[key])[:80]}, which is not {what}"
    wrong_parent = parent_problem(identity.get("parent"))
    if wrong_parent is not None:
        return wrong_parent
    backend = identity.get("backend")
    if backend is None:
        after = [key for key in AFTER_BACKEND if key in identity]
        return f"has {after[0]} but no 'backend'" if after else None
    if backend != path.stem:
        return f"names backend '{backend}', not the '{path.stem}' its name says"
    missing = [key for key in REQUIRED.get(backend, ()) if key not in identity]
    return f"lacks {', '.join(missing)}, which sending to {backend} needs" if missing else None


def parent_problem(parent: Any) -> Optional[str]:
    """What is wrong with a sweep's ``parent`` as the mlflow hook saves it (None for none): the study's name (the file
    that keeps the parent run's id is found from the run folder, ``sweep_parent.parent_file``; an identity of an
    earlier version names it too, and that name is not used)."""
    if parent is None:
        return None
    if not isinstance(parent, dict) or not string(parent.get("study")):
        return "has a 'parent' that is not a sweep's (its study's name)"
    return None


def read_identity(path: Path) -> Dict[str, Any]:
    """The identity in ``path`` (``<run>/trackers/<name>.json``); {} when there is none yet; OutputError when it
    cannot be read or is no identity this framework wrote."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        identity = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise unusable(path, str(err)) from err
    wrong = problem(identity, path)
    if wrong is not None:
        raise unusable(path, wrong)
    return identity


def unusable(path: Path, why: str) -> OutputError:
    return OutputError(
        f"cannot read the tracker's identity '{path}' ({why}); restore it from a copy or remove the run's trackers/ "
        "folder to start a new tracker run"
    )
