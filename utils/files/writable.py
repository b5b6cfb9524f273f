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
    for at in (given, *given.parents):
        if at.is_dir():
            break
        if os.path.lexists(at):  # a file, or a link to nowhere: no folder can be made there
            return "is a file" if at == given else f"lies under the file '{at}'"
    if os.access(at, os.W_OK | os.X_OK):
        return None
    reason = "read-only file system" if os.statvfs(at).f_flag & os.ST_RDONLY else "permission denied"
    return f"is not writable ({reason})" if at == given else f"cannot be made: '{at}' is not writable ({reason})"
