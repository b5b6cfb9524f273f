"""Data folders as users fill them: what counts as a class or a sample, and classes a split lacks.

Names starting with ``.`` or ``__`` and the debris of operating systems and tools
(``.ipynb_checkpoints``, ``__MACOSX``, ``.DS_Store``, ``._photo.jpg``, ``Thumbs.db``,
``desktop.ini``, ``@eaDir`` ...) are never classes and never samples. Symlinked folders are
followed, but each real directory is walked once: a link back up the tree neither loops
nor repeats a file (``walk_visible``, ``glob_visible``).
"""

from __future__ import annotations

import fnmatch
import logging
import os
import re
from pathlib import Path
from typing import Iterator, List, Sequence, Set, Tuple

from utils.errors import name_list

log = logging.getLogger(__name__)

DEBRIS = {
    "thumbs.db",
    "ehthumbs.db",
    "desktop.ini",
    "@eadir",
    "$recycle.bin",
    "system volume information",
    "lost+found",
    "icon\r",
}

_warned: Set[Tuple[str, Tuple[str, ...]]] = set()  # (split folder, missing classes) already reported in this process


def visible(name: str) -> bool:
    """False for hidden names (``.x``, ``__x``) and the known debris of OSes, notebooks and NAS boxes."""
    return not name.startswith((".", "__")) and name.lower() not in DEBRIS


def subfolders(folder: Path) -> List[str]:
    """The visible subfolders of ``folder`` (symlinked ones too), sorted by name."""
    with os.scandir(folder) as entries:
        return sorted(entry.name for entry in entries if entry.is_dir() and visible(entry.name))


def walk_visible(top: Path) -> Iterator[Tuple[str, List[str], List[str]]]:
    """``os.walk(top, followlinks=True)`` without hidden or debris folders and files, subfolders in
    name order, and each real directory once: a subfolder that leads to a directory already walked
    or listed (a link back up the tree, two links to one folder) is left out of ``dirnames``, so
    the walk ends and yields no file twice (the shallower path to a directory wins). Pruning the
    yielded ``dirnames`` in place keeps the walk out of them, as with ``os.walk``."""
    claimed: Set[str] = {os.path.realpath(top)}
    for dirpath, dirnames, filenames in _walk(str(top)):
        keep = []
        for name in sorted(d for d in dirnames if visible(d)):
            real = os.path.realpath(os.path.join(dirpath, name))
            if real not in claimed:  # else os.walk follows a loop until the OS refuses the path (about 40 levels)
                claimed.add(real)
                keep.append(name)
        dirnames[:] = keep  # in place: os.walk enters only these
        yield dirpath, dirnames, [f for f in filenames if visible(f)]


def _walk(top: str) -> Iterator[Tuple[str, List[str], List[str]]]:
    """``os.walk(top, followlinks=True)``, top-down (pruning ``dirnames`` in place keeps it out of them), whose file
    names leave out a FIFO, socket or device (or a link to one): such an entry of a handed data folder is never a
    sample, and opening it blocks for ever (a FIFO) or never ends (``/dev/zero``). A broken link stays a file name,
    as with ``os.walk``: its reader names it. The entries' types come from the directory listing, as os.walk's do;
    only links are looked up."""
    try:
        with os.scandir(top) as listing:
            entries = list(listing)
    except OSError:  # as os.walk: an unreadable folder yields nothing
        return
    dirnames, filenames = [], []
    for entry in entries:
        try:
            if entry.is_dir():
                dirnames.append(entry.name)
                continue
            special = not entry.is_file() and (not entry.is_symlink() or os.path.exists(entry.path))
        except OSError:
            special = False
        if not special:
            filenames.append(entry.name)
    yield top, dirnames, filenames
    for name in dirnames:
        yield from _walk(os.path.join(top, name))


_MAGIC = re.compile(r"[*?[]")


def split_glob(pattern: str) -> Tuple[Path, Tuple[str, ...]]:
    """``(root, rest)``: the folder a glob searches (its leading components without a wildcard,
    ``.`` when none) and the components left to match below it (empty when nothing is magic)."""
    parts = Path(pattern).parts
    first = next((i for i, part in enumerate(parts) if _MAGIC.search(part)), len(parts))
    return (Path(*parts[:first]) if first else Path(".")), parts[first:]


def _matches(parts: Sequence[str], pattern: Sequence[str]) -> bool:
    """``parts`` (path components) match ``pattern``'s components; ``**`` stands for any number of folders."""
    if not pattern:
        return not parts
    if pattern[0] == "**":
        return any(_matches(parts[i:], pattern[1:]) for i in range(len(parts) + 1))
    return bool(parts) and fnmatch.fnmatchcase(parts[0], pattern[0]) and _matches(parts[1:], pattern[1:])


def glob_visible(pattern: str) -> List[Path]:
    """The files and folders ``pattern`` matches, by ``glob.glob(pattern, recursive=True)``'s rules
    (``**``: any number of folders), sorted, hidden and debris names left out. Found by
    ``walk_visible``: a link back up the tree repeats nothing (``glob`` follows it about 40
    levels deep, and two such links take it forever)."""
    root, rest = split_glob(pattern)
    if not rest:
        return [root] if root.exists() else []
    found: List[Path] = []
    for dirpath, dirnames, filenames in walk_visible(root):
        here = Path(dirpath).relative_to(root).parts
        found += [Path(dirpath) / name for name in (*dirnames, *filenames) if _matches((*here, name), rest)]
        if "**" not in rest:  # no deeper than the pattern goes, and only into folders its components match
            dirnames[:] = [d for d in dirnames if len(here) + 1 < len(rest) and fnmatch.fnmatchcase(d, rest[len(here)])]
    return sorted(found)


def warn_missing_classes(folder: Path, classes: Sequence[str], present: Set[str]) -> None:
    """A warning (once per folder and process) naming the ``classes`` that ``folder`` has no sample of."""
    missing = tuple(str(c) for c in classes if str(c) not in present)
    key = (str(folder), missing)
    if not missing or key in _warned:
        return
    _warned.add(key)
    log.warning(
        "'%s' has no samples of %d of the %d classes (%s); its metrics cover only the others",
        folder,
        len(missing),
        len(classes),
        name_list(missing),
    )
