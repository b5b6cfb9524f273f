"""Loading a config: dataclass defaults <- a base (a checkpoint's config) <- YAML file <- ``key.sub=value``
overrides, each key merged with its type checked (``utils/typed_merge.py``), then the whole config checked
(``utils/config_checks.py``) before any data is read."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from utils.config import Config
from utils.config_checks import validate
from utils.config_rules import expand_paths
from utils.typed_merge import apply_override, merge_into, parse_override
from utils.yaml_load import read_config_file


def load_config(
    path: Optional[Union[str, Path]] = None,
    overrides: Optional[List[str]] = None,
    base: Optional[Dict[str, Any]] = None,
) -> Config:
    """Defaults, then ``base`` (e.g. a checkpoint's config), then the YAML file, then overrides."""
    cfg = Config()
    if base:
        merge_into(cfg, copy.deepcopy(base), "")
    if path is not None:
        merge_into(cfg, read_config_file(Path(path)), "")
    for item in overrides or []:
        apply_override(cfg, *parse_override(item))
    expand_paths(cfg)
    validate(cfg)
    return cfg
