"""Files of a predict or export folder, written whole or not at all.

Each file is written under a temporary name in its own folder and renamed when complete, so
a full disk or a missing permission never leaves a truncated mask, CSV or model under its
name: the failure is one ``OutputError`` line naming the file, with the advice of the mode
that wrote it (predict and export have no ``--resume``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Dict

import yaml

from utils.config import Config, to_dict
from utils.errors import OutputError

PREDICT_ADVICE = "run the predict again (into a new or empty --output, or without --output)"
EXPORT_ADVICE = "run the export again (into a new or empty --output, or without --output)"


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


def write_config(cfg: Config, path: Path, advice: str) -> None:
    """The resolved config as YAML that ``--config`` reads back (as ``utils/config.py`` saves it), written whole."""
    write_text(path, yaml.safe_dump(to_dict(cfg), sort_keys=False), advice)


def write_json(path: Path, data: Dict[str, Any], advice: str) -> None:
    """``data`` as indented JSON, written whole."""
    write_text(path, json.dumps(data, indent=2) + "\n", advice)
