"""Whether files can be written in a folder (made first where it is missing), asked before anything is written."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def why_not_writable(folder: Path) -> Optional[str]:
    """Why no file can be written in ``folder`` (made with its missing parents first), worded to follow its name:
    ``is a file``, ``lies under the file 'X'``, ``is not writable (read-only file system)``, ``cannot be made:
    'X' is not writable (permission denied)``; None when one can. Nothing is made or written here."""
    given = Path(folder).expanduser().absolute()
    too_long = name_too_long(given)
    if too_long is not None:
        return too_long
    for at in (given, *given.parents):
        if at.is_dir():
            break
        if os.path.lexists(at):  # a file, or a link to nowhere: no folder can be made there
            return "is a file" if at == given else f"lies under the file '{at}'"
    if os.access(at, os.W_OK | os.X_OK):
        return None
    reason = "read-only file system" if os.statvfs(at).f_flag & os.ST_RDONLY else "permission denied"
    return f"is not writable ({reason})" if at == given else f"cannot be made: '{at}' is not writable ({reason})"


def name_too_long(path: Path) -> Optional[str]:
    """Why ``path`` cannot be a file or folder on its file system because of its length, worded to follow its
    name (``has a name of 300 bytes, more than the 255 ...``); None when it fits. Asked before the path is looked
    at: every call on such a path (``exists``, ``is_dir``) raises ``OSError`` (File name too long)."""
    given = Path(path).expanduser().absolute()
    here = next((at for at in given.parents if _is_dir(at)), Path("/"))
    try:
        name_max, path_max = os.pathconf(here, "PC_NAME_MAX"), os.pathconf(here, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in given.parts:
        if len(os.fsencode(part)) > name_max:
            return f"has a name of {len(os.fsencode(part))} bytes ('{part[:40]}...'), more than the {name_max} its file system allows"
    if len(os.fsencode(str(given))) >= path_max:
        return f"is {len(os.fsencode(str(given)))} bytes long, more than the {path_max - 1} its file system allows"
    return None


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long on the way
        return False
