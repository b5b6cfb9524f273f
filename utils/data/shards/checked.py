"""A stamp that a split's index was checked whole on this machine, so that later starts check it at a cost flat in
the sample count (``index_load.py``).

Checking an index whole (every sample's shard, members, label, key and stem; each array's sha256 against
``index.json``) is a few passes over its arrays: about 850 MB at 10 million samples, seconds per rank at every
start. So the first load checks it whole and records a stamp; a load that finds a stamp matching the files as
they are now trusts it and checks only what costs nothing per sample (``index.json`` itself, the arrays' types,
shapes and sizes). A stamp holds, for each array file, its resolved path, device, inode, size, modification and
change times (nanoseconds), and the sha256 of ``index.json``: any write to an array (``np.save``, an editor,
a copy over it, a rename onto it) changes its change time, which no user can set back, so a changed array is
checked whole again and a labels column shifted after packing is one line naming the array.

Stamps live in the user's own cache, ``$XDG_CACHE_HOME/regtrain-index-checks`` (``~/.cache`` by default), never
in the pack: a pack may be read-only or shared, and a stamp inside it could be written by whoever handed the
pack over. Only this user's own processes write here, and a stamp proves only that this machine checked these
very files (a pack copied, moved to another disk or packed again is checked once more). A stamp that cannot be
written (a read-only home) costs a whole check at every start, nothing else.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Dict, Optional

from utils.errors import UserError
from utils.files.owned import make_dirs, write_text

log = logging.getLogger(__name__)
FOLDER = "regtrain-index-checks"
CHECKS = 1  # raised whenever index_load's whole check changes: a stamp of older checks proves nothing
_SAID: set = set()


def stamp_folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / FOLDER


def facts(index_text: bytes, files: Dict[str, Path]) -> Optional[Dict[str, Any]]:
    """What a stamp of ``files`` (the mapped arrays, by name) read with ``index_text`` holds; None when a file
    cannot be looked at (the load's own error comes first)."""
    arrays = {}
    try:
        for name, path in sorted(files.items()):
            st = os.stat(path)
            arrays[name] = [str(Path(path).resolve()), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
    except OSError:
        return None
    return {"checks": CHECKS, "index": hashlib.sha256(index_text).hexdigest(), "arrays": arrays}


def _path(found: Dict[str, Any]) -> Path:
    """The stamp's file: named by the index's sha256 and where its arrays lie (two copies of a pack: two stamps)."""
    where = "\0".join(entry[0] for entry in found["arrays"].values())
    return (
        stamp_folder()
        / f"{hashlib.sha256((found['index'] + where).encode('utf-8', 'surrogateescape')).hexdigest()[:40]}.json"
    )


def proven(found: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """What the whole check found beside the stamp (the keys' sha256: the data's fingerprint), when a stamp
    records exactly ``found`` (the files as they are now) as checked whole; None otherwise."""
    if found is None:
        return None
    try:
        with open(_path(found), "rb") as fh:
            stamp_ = json.loads(fh.read(1 << 16))
    except (OSError, ValueError):
        return None
    kept = stamp_.get("proven") if isinstance(stamp_, dict) and stamp_.get("facts") == found else None
    return kept if isinstance(kept, dict) else None


def stamp(found: Optional[Dict[str, Any]], learned: Dict[str, Any]) -> None:
    """Records ``found`` (taken before the whole check: a file changed meanwhile does not match it) as checked,
    with what the check ``learned`` (the next start checks whole again where it cannot be written)."""
    if found is None:
        return
    path = _path(found)
    # ASCII: a path's undecodable bytes as \udcXX escapes, read back the same
    text = json.dumps({"facts": found, "proven": learned})

    def write() -> None:
        write_text(path.parent, path, text, "a stamp is only a shortcut")

    kept_in_cache(write, "record a checked index", "each start checks it whole")


def kept_in_cache(write: Callable[[], Any], what: str, otherwise: str) -> bool:
    """``write()`` into ``stamp_folder()`` (made first), whether it was; a cache that refuses (a read-only home) is
    said once per process, folder and ``what``, at info level (``what`` could not be done, ``otherwise`` follows): what is
    kept there is only a shortcut."""
    folder = stamp_folder()
    try:
        make_dirs(folder, folder)  # the user's cache folder: theirs to choose, a link included
        write()
        return True
    except (OSError, UserError) as err:
        if (str(folder), what) not in _SAID:
            _SAID.add((str(folder), what))
            log.info("could not %s in '%s' (%s); %s", what, folder, err, otherwise)
        return False
