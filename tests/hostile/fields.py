"""Every field of every file others hand over, made hostile: a format registers here and meets the same values.

A format registers (``register``) its name, how to make a genuine file of it in a folder (``make``) and how the
framework reads it (``read``, in-process, given a folder of its own it may write: a cache). ``variants`` then
gives the document with each field in turn (every key of every object, the first and the last item of every
list, at any depth) replaced by a value of another type, a number out of range, a path that leaves the folder
(absolute, ``..``), a URL, text that is not UTF-8 (raw bytes, and a lone surrogate escape), or removed.
``check_format`` reads every variant and asserts what the framework promises of a handed file: one error line
(a ``UserError``) or a correct read, never another exception, and nothing written outside the folders it owns.
New formats (tracker identities, sweep journals) join by registering, not by writing these loops again.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, Set, Tuple

import pytest

from utils.errors import UserError

RAW = "\u0000raw-bytes\u0000"  # replaced by bytes that are not UTF-8 once the document is serialised
OUTSIDE = "\u0000outside\u0000"  # replaced by the absolute path of a folder outside everything the read owns
HOSTILE: Tuple[Any, ...] = (
    None, True, 0, -1, 2**31, 2**63, 2**70, -(2**70), 1.5, float("nan"), "", "x" * 4096,
    "/", "..", "../../..", "../../outside/x", OUTSIDE, "http://198.51.100.7/x", "s3://another-bucket/x",
    "\udcff\udcfe", RAW, [], {}, [1, "a"], {"a": 1},
)  # fmt: skip
Path_ = Tuple[Any, ...]  # keys and list indices from the document's top


@dataclass(frozen=True)
class Format:
    """A file others hand over: ``make(folder)`` writes a genuine one (and what it needs) and returns its path;
    ``read(path, own)`` reads it as the framework does (``own``: a folder it may write), raising a UserError for
    a bad one."""

    name: str
    make: Callable[[Path], Path]
    read: Callable[[Path, Path], Any]


FORMATS: Dict[str, Format] = {}


def register(fmt: Format) -> Format:
    FORMATS[fmt.name] = fmt
    return fmt


def fields(document: Any, at: Path_ = ()) -> Iterator[Path_]:
    """Every field of ``document``: each key of each object, the first and last item of each list, at any depth."""
    if isinstance(document, dict):
        items = list(document.items())
    elif isinstance(document, list):
        items = [(i, document[i]) for i in sorted({0, len(document) - 1})] if document else []
    else:
        return
    for key, value in items:
        yield at + (key,)
        yield from fields(value, at + (key,))


def shown(at: Path_) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in at).lstrip(".")


def _replaced(document: Any, at: Path_, value: Any, remove: bool = False) -> Any:
    changed = copy.deepcopy(document)
    parent = changed
    for key in at[:-1]:
        parent = parent[key]
    if remove:
        del parent[at[-1]]
    else:
        parent[at[-1]] = value
    return changed


def variants(document: Any, outside: Path) -> Iterator[Tuple[str, bytes]]:
    """``(what was changed, the document's bytes)`` for every field of ``document`` and every hostile value."""
    for at in fields(document):
        for value in HOSTILE:
            text = json.dumps(_replaced(document, at, value)).replace(json.dumps(OUTSIDE)[1:-1], str(outside))
            data = text.encode("utf-8", "surrogatepass").replace(json.dumps(RAW)[1:-1].encode(), b"\xff\xfe")
            yield f"{shown(at)} = {value!r}", data
        yield f"{shown(at)} removed", json.dumps(_replaced(document, at, None, remove=True)).encode()


def _tree(folder: Path, skip: Path) -> Set[str]:
    """Every path under ``folder`` but ``skip`` (the read's own folder) and what it holds."""
    found = set()
    for parent, folders, files in os.walk(folder):
        folders[:] = [name for name in folders if Path(parent, name) != skip]
        found.update(os.path.join(parent, name) for name in folders + files)
    return found


def _overwrite(path: Path, data: bytes) -> None:
    """``data`` as the whole of ``path``, written over it rather than after truncating it to nothing (ext4 then
    flushes the file at each close: 10 ms a variant)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)


def check_format(fmt: Format, tmp_path: Path) -> int:
    """Reads every variant of ``fmt``'s genuine file; fails naming the field for a traceback or for anything
    written outside the handed folder and the read's own. Returns how many variants were read."""
    handed, own, outside = tmp_path / "handed", tmp_path / "own", tmp_path / "outside"
    own.mkdir()
    outside.mkdir()
    path = fmt.make(handed)
    genuine = path.read_bytes()
    fmt.read(path, own)  # the genuine file reads
    before = _tree(tmp_path, own)
    count = 0
    for what, data in variants(json.loads(genuine), outside):
        _overwrite(path, data)
        try:
            fmt.read(path, own)
        except UserError as err:
            assert str(err) and "\n" not in str(err), f"{fmt.name}: {what}: {err}"
        except Exception as err:  # noqa: BLE001 - any other is the traceback a user would see
            pytest.fail(f"{fmt.name}: {what}: {type(err).__name__}: {err}")
        assert _tree(tmp_path, own) == before and not any(outside.iterdir()), f"{fmt.name}: {what}"
        count += 1
    path.write_bytes(genuine)
    return count
