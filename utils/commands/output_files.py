"""Files of a predict or export folder, written whole or not at all.

Each file is written under a temporary name in its own folder and renamed when complete, so
a full disk or a missing permission never leaves a truncated mask, CSV or model under its
name: the failure is one ``OutputError`` line naming the file, with the advice of the mode
that wrote it (predict and export have no ``--resume``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import yaml

from utils.config.schema import Config, to_dict
from utils.files.owned import write_text  # written whole or not at all, never through a link

PREDICT_ADVICE = "run the predict again (into a new or empty --output, or without --output)"
EXPORT_ADVICE = "run the export again (into a new or empty --output, or without --output)"


def write_config(cfg: Config, path: Path, advice: str) -> None:
    """The resolved config as YAML that ``--config`` reads back (as ``utils/config/schema.py`` saves it), written whole."""
    write_text(path.parent, path, yaml.safe_dump(to_dict(cfg), sort_keys=False), advice)


def write_json(path: Path, data: Dict[str, Any], advice: str) -> None:
    """``data`` as indented JSON, written whole."""
    write_text(path.parent, path, json.dumps(data, indent=2) + "\n", advice)
