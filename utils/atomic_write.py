"""Files written whole or not at all: the bytes go to a hidden temporary name beside the file and are renamed
over it when complete, so a full disk or a missing permission never leaves a truncated CSV, PNG or model under
its name. A failure is one ``OutputError`` line naming the file, with the advice of the mode that wrote it.

Used by the modes that write a folder of their own (predict and export: ``utils/commands/output_files.py``;
``--mode compare``: ``utils/compare/``); standard library and ``utils/errors.py`` only.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from utils.errors import OutputError


def temporary_name(path: Path) -> Path:
    """A hidden name beside ``path`` for its bytes until they are complete (hidden: never read as an input)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_atomic(path: Path, write: Callable[[Path], Any], advice: str) -> None:
    """``write(temporary path)``, then rename it to ``path``; a failed write (OSError: a full disk, no
    permission) removes the temporary file and is an OutputError naming ``path`` with ``advice``."""
    tmp = temporary_name(path)
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise OutputError.writing(path, err, advice) from err


def write_text(path: Path, text: str, advice: str) -> None:
    """``text`` as the whole of ``path`` (see ``write_atomic``)."""
    write_atomic(path, lambda tmp: tmp.write_text(text), advice)
