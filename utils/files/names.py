"""Names read from files others made (a data index's keys and stems, a checkpoint's or record's file
names, a results folder's tags) become output paths only through :func:`inside`.

A name that is absolute, climbs with ``..``, holds a NUL byte or resolves (through a link) outside its
destination is refused with one line naming where it came from; it is never mapped to another name,
so an output is always named as its source says or not written at all. ``relative_name``,
``plain_name`` and ``path_inside`` are the same rule as a test, for checks that run when a file is loaded
(before any work), so a crafted file is refused at once rather than at its first write.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any

from utils.errors import DataError


def relative_name(name: Any) -> bool:
    """Whether ``name`` is a relative path that stays below its folder: a non-empty string, not absolute,
    no ``..`` part, no NUL byte (sub-folders allowed: a key mirrors the data's tree)."""
    if not isinstance(name, str) or not name or "\0" in name:
        return False
    path = PurePosixPath(name)
    return not path.is_absolute() and ".." not in path.parts and path.parts not in ((), (".",))


def plain_name(name: Any) -> bool:
    """Whether ``name`` is a file name of its own: ``relative_name`` without any folder."""
    return relative_name(name) and "/" not in name and name != "."


def inside(destination: Path, name: str, source: str) -> Path:
    """``destination / name``, refused (a DataError naming ``source``, where the name was read) when ``name`` is
    not a ``relative_name`` or resolves outside ``destination`` (a link inside it pointing away)."""
    path = Path(destination) / name if relative_name(name) else None
    if path is not None:
        try:
            path.resolve().relative_to(Path(destination).resolve())
            return path
        except ValueError:
            pass
    raise DataError(
        f"{source} names {name!r}, which would be written outside '{destination}'; names read from files "
        "stay inside their destination (relative, no '..', no link leading out): correct or re-create the file"
    )


def path_inside(destination: Path, path: Any) -> bool:
    """Whether ``path``, a whole path read from a file (absolute, or relative to the current directory, where its
    reader opens it), names something below ``destination`` by :func:`inside`'s rule (links resolved)."""
    if not isinstance(path, str) or not path or "\0" in path:
        return False
    name = os.path.relpath(os.path.abspath(path), os.path.abspath(destination))
    try:
        inside(destination, name, "")
    except DataError:
        return False
    return True
