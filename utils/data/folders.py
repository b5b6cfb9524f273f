"""Data folders as users fill them: what counts as a class or a sample, and classes a split lacks.

Names starting with ``.`` or ``__`` and the debris of operating systems and tools
(``.ipynb_checkpoints``, ``__MACOSX``, ``.DS_Store``, ``._photo.jpg``, ``Thumbs.db``,
``desktop.ini``, ``@eaDir`` ...) are never classes and never samples.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator, List, Sequence, Set, Tuple

from utils.errors import name_list

log = logging.getLogger(__name__)

DEBRIS = {"thumbs.db", "ehthumbs.db", "desktop.ini", "@eadir", "$recycle.bin", "system volume information", "lost+found", "icon\r"}

_warned: Set[Tuple[str, Tuple[str, ...]]] = set()  # (split folder, missing classes) already reported in this process


def visible(name: str) -> bool:
    """False for hidden names (``.x``, ``__x``) and the known debris of OSes, notebooks and NAS boxes."""
    return not name.startswith((".", "__")) and name.lower() not in DEBRIS


def subfolders(folder: Path) -> List[str]:
    """The visible subfolders of ``folder`` (symlinked ones too), sorted by name."""
    with os.scandir(folder) as entries:
        return sorted(entry.name for entry in entries if entry.is_dir() and visible(entry.name))


def walk_visible(top: Path) -> Iterator[Tuple[str, List[str], List[str]]]:
    """``os.walk(top, followlinks=True)`` without hidden or debris folders and files."""
    for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
        dirnames[:] = [d for d in dirnames if visible(d)]  # pruned in place: os.walk does not enter them
        yield dirpath, dirnames, [f for f in filenames if visible(f)]


def warn_missing_classes(folder: Path, classes: Sequence[str], present: Set[str]) -> None:
    """A warning (once per folder and process) naming the ``classes`` that ``folder`` has no sample of."""
    missing = tuple(str(c) for c in classes if str(c) not in present)
    key = (str(folder), missing)
    if not missing or key in _warned:
        return
    _warned.add(key)
    log.warning("'%s' has no samples of %d of the %d classes (%s); its metrics cover only the others", folder, len(missing), len(classes), name_list(missing))
