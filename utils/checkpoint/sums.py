"""``SHA256SUMS`` of a sharded checkpoint directory: written once, read line by line with every line checked.

The file lists every other file of the directory as ``<sha256 hex>  <file name>`` (the layout of
``sha256sum``). Reading it, anything but that is a problem named in one line: an empty file, a
garbled line, a name that is a path (a separator, ``.``/``..``), a name listed twice, a file
of the directory that is not listed, a listed file that is missing or differs.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

_LINE = re.compile(r"^([0-9a-f]{64})  (.+)$")


def sums_text(directory: Path, name: str, digest: Callable[[Path], str]) -> str:
    """The ``SHA256SUMS`` text for the files of ``directory`` (all but ``name`` itself), sorted by name."""
    files = sorted(f for f in Path(directory).iterdir() if f.is_file() and f.name != name)
    return "".join(f"{digest(f)}  {f.name}\n" for f in files)


def parse_sums(path: Path) -> Union[Dict[str, str], str]:
    """name -> digest from the ``SHA256SUMS`` file ``path``, or the problem with it (a string)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return f"{path.name} is not text"
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        return f"{path.name} is empty"
    listed: Dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        match = _LINE.match(line)
        if match is None:
            return f"{path.name} line {number} is not '<sha256>  <file name>': {line[:60]!r}"
        digest, name = match.groups()
        if "/" in name or "\\" in name or name in (".", "..") or name.strip() != name:
            return f"{path.name} line {number} names {name!r}, not a file of the directory"
        if name in listed:
            return f"{path.name} lists '{name}' twice"
        listed[name] = digest
    return listed


def check_sums(directory: Path, name: str, digest: Callable[[Path], str]) -> Optional[str]:
    """None when ``directory``'s files are exactly those its ``SHA256SUMS`` (``name``) lists, with those digests; else the problem."""
    directory = Path(directory)
    listed = parse_sums(directory / name)
    if isinstance(listed, str):
        return listed
    present: List[str] = sorted(f.name for f in directory.iterdir() if f.name != name)
    unlisted = [f for f in present if f not in listed]
    if unlisted:
        return f"'{unlisted[0]}' is in the directory but not listed in {name}{f' (and {len(unlisted) - 1} more)' if len(unlisted) > 1 else ''}"
    for file, expected in listed.items():
        path = directory / file
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return f"'{file}' is a link or a folder, not a file of the directory"
        if not path.is_file():
            return f"shard '{file}' is missing"
        if digest(path) != expected:
            return f"shard '{file}' fails its checksum (truncated or corrupt)"
    return None
