"""Loading a config: dataclass defaults <- a base (a checkpoint's config) <- YAML file <- ``key.sub=value``
overrides, each key merged with its type checked (``utils/config/typed_merge.py``), a password in any of its URIs held as a
secret (``utils/secret_text.py``), then the whole config checked (``utils/config/checks.py``) before any data is
read. An experiment without a name is named after the config (``default_experiment_name``)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

from utils.config.checks import validate
from utils.config.given import decides, given_keys, is_given
from utils.config.rules import expand_paths, plain_name
from utils.config.schema import Config
from utils.config.typed_merge import apply_override, merge_into, parse_override
from utils.config.yaml_load import read_config_file
from utils.secret_text import hide_all


def load_config(
    path: Optional[Union[str, Path]] = None,
    overrides: Optional[List[str]] = None,
    base: Optional[Dict[str, Any]] = None,
) -> Config:
    """Defaults, then ``base`` (e.g. a checkpoint's config), then the YAML file, then overrides. A dataset whose
    data decides the network's shape leaves ``model.input_size`` None where none of them sets it."""
    cfg = Config()
    if base:
        merge_into(cfg, copy.deepcopy(base), "")
    if path is not None:
        merge_into(cfg, read_config_file(Path(path)), "")
    for item in overrides or []:
        apply_override(cfg, *parse_override(item))
    if decides(cfg.data.name) and not is_given(given_keys(path, overrides or [], base), "model.input_size"):
        cfg.model.input_size = None  # the data's, once it is read (utils/data/shape_from_data.py)
    if cfg.experiment.name is None:
        cfg.experiment.name = default_experiment_name(cfg, path)
    expand_paths(cfg)
    hide_all(cfg)  # a password in a URI is a Secret from here: shown masked everywhere (utils/secret_text.py)
    validate(cfg)
    return cfg


def default_experiment_name(cfg: Config, path: Optional[Union[str, Path]]) -> str:
    """The experiment's name when the config gives none: the ``--config`` file's name without its suffix
    (``configs/my_resnet.yaml``: ``my_resnet``), else ``<data.name>_<model.args.backbone, else model.name>``
    (the defaults: ``digits_small_cnn``)."""
    stem = Path(path).stem if path is not None else ""
    if stem and plain_name(stem):
        return stem
    backbone = cfg.model.args.get("backbone") if isinstance(cfg.model.args, dict) else None
    return f"{cfg.data.name}_{backbone if isinstance(backbone, str) else cfg.model.name}"
