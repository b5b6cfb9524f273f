"""How a checkpoint's dataset sized an eval sample, read from its config: the ``data.args`` it saw (the config's
value, else the dataset's own default), when it resized (before or after the eval transforms), and the override
that brings other inputs to the size the network was trained at. ``--mode test`` holds the test split to it and
``--mode predict`` its inputs.
"""

from __future__ import annotations

import inspect
from typing import Any, Optional, Tuple

import yaml

from utils.config.schema import Config
from utils.data.masks import size_pair
from utils.data.predict_inputs import Sizing
from utils.registry import DATASETS


def dataset_parameters(cfg: Config) -> Any:
    return inspect.signature(DATASETS.get(cfg.data.name)).parameters


def dataset_arg(cfg: Config, name: str) -> Any:
    """``data.args.<name>`` as the training dataset saw it: the config's value, else the dataset's own default."""
    if name in cfg.data.args:
        return cfg.data.args[name]
    parameter = dataset_parameters(cfg).get(name)
    return None if parameter is None or parameter.default is inspect.Parameter.empty else parameter.default


def flow(value: Any) -> str:
    """``value`` as one line of YAML flow style, as a fix to paste on the command line."""
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()


def _size_rule(cfg: Config, takes: Any) -> Tuple[Optional[str], Optional[str]]:
    """``(data.args key, "first" | "last")`` that sizes the dataset's samples: "first" before the eval transforms
    (image_folder resizes each image), "last" after them (the mask datasets' PairPipeline), as the dataset
    declares (``SIZING``; per task for ``shards``), else ``(None, None)``: the stored size."""
    rule = getattr(DATASETS.get(cfg.data.name), "SIZING", None)
    if isinstance(rule, dict):  # a dataset of several tasks (shards): the reading dataset's, by the task
        rule = rule.get(cfg.eval.metric)
    if rule is not None:
        return rule
    # a user's dataset without SIZING: the task's convention
    if cfg.eval.metric == "sod" and "size" in takes:
        return "size", "last"
    if "image_size" in takes:
        return "image_size", "first"
    return None, None


def input_sizing(cfg: Config) -> Sizing:
    """How the checkpoint's dataset sized an eval sample (``_size_rule``), its channels, and the size the network
    was trained at (``model.input_size``), with the override that resizes inputs to it."""
    takes = dataset_parameters(cfg)
    trained_at = tuple(cfg.model.input_size) if cfg.model.input_size else None
    channels = dataset_arg(cfg, "channels") if "channels" in takes else (trained_at[0] if trained_at else 3)
    key, when = _size_rule(cfg, takes)
    size = dataset_arg(cfg, key) if key else None
    height, width = trained_at[-2:] if trained_at and len(trained_at) >= 2 else ("H", "W")
    if when == "last":  # the mask datasets resize after the transforms: their size is the setting
        fix = f"data.args.size={height if height == width else flow([height, width])}"
    else:  # a Resize ahead of the checkpoint's own eval transforms
        fix = "data.eval_transforms=" + flow([{"name": "Resize", "size": [height, width]}, *cfg.data.eval_transforms])
    pair = size_pair(size) if size else None
    if cfg.data.loader == "dali":  # DALI decodes RGB and sizes image_size itself (utils/data/dali.py); no transforms
        return Sizing(
            3, trained_at=trained_at, fix=f"data.args.image_size={height}", crop_first=int(size) if size else None
        )
    return Sizing(int(channels), pair if when == "first" else None, pair if when == "last" else None, trained_at, fix)
