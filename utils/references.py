"""A config's names checked against the registries before any data is read.

``utils/config/rules.py`` checks values and the keys that refer to each other;
this module checks what needs the registries: that every network (and its
backbone), dataset, loss, hook and metric the config names exists and takes the
arguments given (the names as ``Registry.build`` checks them later; the values
against the types and ranges the constructors declare, ``utils/config/arguments.py``),
that each hook is named once and serves the run's task, that every
``eval.extra_metrics`` class takes the task's outputs, that ``eval.monitor`` is a
name the metric reports (metrics declare them with ``reported_names``), and that
each transform list builds and works on a fake sample of ``model.input_size``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import logging
import traceback
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from utils.config.arguments import check_values
from utils.config.given import decides
from utils.config.schema import Config
from utils.data.transforms import check_transforms
from utils.errors import ConfigError
from utils.hook.selection import check_hook_entries, check_hook_tasks
from utils.import_place import check_import_place
from utils.optim.optimizers import check_group_keys
from utils.registry import BACKBONES, DATASETS, HOOKS, LOSSES, METRICS, NETWORKS, Registry, UnknownArguments

log = logging.getLogger(__name__)

# what evaluate() reports beside the metric's own names that eval.monitor may name (its "samples" is a count, not a
# score: utils/metrics/extra.py EVALUATION_NAMES lists both), always better lower
MONITORABLE_EVALUATION = ("loss",)


def _named(spec: Dict[str, Any], drop: tuple = ()) -> tuple:
    args = {k: v for k, v in spec.items() if k not in drop}
    return args.pop("name"), args


def _check(
    registry: Registry, name: str, key: str, args: Dict[str, Any], fixed: Optional[Dict[str, Any]] = None
) -> Any:
    """The class ``name`` of ``registry`` once ``args`` (the config's ``key``) fit its signature: the
    names (``Registry.check``, with the ``fixed`` arguments the framework adds), then each value's
    type and range (``utils/config/arguments.py``)."""
    taken = sorted(set(fixed or {}) & set(args))
    if taken:
        raise ConfigError(
            f"config key '{key}.{taken[0]}' is set by the framework for {registry.name} '{name}' (it passes {', '.join(sorted(fixed or {}))}); remove it from {key}"
        )
    try:
        obj = registry.check(name, **(fixed or {}), **args)
    except UnknownArguments as err:  # often args another name took, kept from a config or checkpoint
        raise ConfigError(
            f"{err}; remove them from {key}, or give {key} whole ({key}={{...}} replaces the mapping of the config or checkpoint)"
        ) from None
    check_values(f"{registry.name} '{name}'", key, obj, args)
    return obj


def _names_a_backbone(params: Any) -> bool:
    """Whether a network's ``backbone`` argument is a name in the backbone registry: it takes
    ``backbone_args`` too (the framework's networks), or its default is a registered backbone (a
    user's network that builds ``BACKBONES.build(backbone)`` itself, as the README's ``MyNet``)."""
    if "backbone" not in params:
        return False
    default = params["backbone"].default
    return "backbone_args" in params or (isinstance(default, str) and default in BACKBONES)


def _check_network(model: Any, from_data: bool = False) -> None:
    """The network's arguments, and its backbone's name and arguments (``model.args.backbone``,
    ``model.args.backbone_args``) through the backbone registry; a backbone may refuse combinations of its
    arguments (``check_arguments``) and ``model.input_size`` (``check_input_size``) before anything is built.
    ``from_data``: a ``num_classes`` the network takes and ``model.args`` leaves out is the data's, filled in once
    the data is read (``utils/data/shape_from_data.py``), so it is not missing."""
    args = model.args
    if from_data and isinstance(args, dict) and "num_classes" not in args:
        try:
            takes = inspect.signature(NETWORKS.get(model.name)).parameters
        except (TypeError, ValueError):
            takes = {}
        args = {**args, "num_classes": 2} if "num_classes" in takes else args  # any count: only binding is checked
    network = _check(NETWORKS, model.name, "model.args", args)
    try:
        params = inspect.signature(network).parameters
    except (TypeError, ValueError):  # no signature to read: Registry.check let it pass too
        return
    if not _names_a_backbone(params):
        return
    backbone = model.args.get("backbone", params["backbone"].default)
    if "backbone_args" not in params:  # the network passes its own arguments: the name is what can be checked
        if isinstance(backbone, str):
            BACKBONES.get(backbone)  # RegistryError: the known names and the closest
        return
    backbone_args = model.args.get("backbone_args") or {}
    if not isinstance(backbone, str) or not isinstance(backbone_args, dict):
        return  # a type the network's own annotations refused above, or a plugin's own convention
    cls = _check(BACKBONES, backbone, "model.args.backbone_args", backbone_args)
    check_args = getattr(cls, "check_arguments", None)  # what annotations cannot say (the timm backbone's own rules)
    if check_args is not None:
        check_args(backbone_args)
    check_input = getattr(cls, "check_input_size", None)
    if check_input is not None and model.input_size:
        check_input(list(model.input_size), backbone_args)


def check_references(cfg: Config) -> None:
    """ConfigError (or RegistryError) for the first name that does not resolve or does not take its arguments."""
    _check(
        DATASETS,
        cfg.data.name,
        "data.args",
        cfg.data.args,
        fixed={"split": "train", "root": cfg.data.root, "transform": None},
    )
    _check_network(cfg.model, decides(cfg.data.name))
    for key in ("train_transforms", "eval_transforms"):  # built, and tried on a fake sample of model.input_size
        check_transforms(getattr(cfg.data, key), f"data.{key}", cfg.model.input_size)
    for i, spec in enumerate(cfg.loss):
        name, args = _named(spec, drop=("weight", "output"))
        _check(LOSSES, name, f"loss[{i}]", args)
    check_hook_entries(cfg.hooks)
    for i, spec in enumerate(cfg.hooks):
        name, args = _named(spec, drop=("enabled",))  # the switch of a default hook, not an argument
        _check(HOOKS, name, f"hooks[{i}]", args)
    check_hook_tasks(cfg.hooks, cfg.eval.metric)
    check_group_keys(cfg.optim.param_groups)
    extras = cfg.eval.extra_metrics
    if extras:  # each class exists, takes its arguments and the task's outputs (num_classes as the network's, until the data tells)
        from utils.metrics.extra import check_extras

        check_extras(extras, cfg.eval.metric, cfg.model.args.get("num_classes"))
    check_monitor(
        cfg.eval.metric, cfg.eval.monitor, extras
    )  # its direction: monitor_mode, once (utils/commands/start.py)


def _extra_directions(extras: Sequence[Dict[str, Any]]) -> Dict[str, Optional[str]]:
    if not extras:
        return {}
    from utils.metrics.extra import extra_directions  # torchmetrics only when asked for

    return extra_directions(extras)


def check_monitor(metric_name: str, monitor: str, extras: Sequence[Dict[str, Any]] = ()) -> None:
    """``eval.monitor`` is a name the metric or an ``eval.extra_metrics`` entry reports (when they declare them)."""
    names = METRICS.build(metric_name).reported_names()
    if names is None:
        return
    reported: List[str] = [*names, *_extra_directions(extras), *MONITORABLE_EVALUATION]
    if monitor not in reported:
        hint = difflib.get_close_matches(monitor, reported, n=1, cutoff=0.0)
        raise ConfigError(
            f"config key 'eval.monitor' is '{monitor}', but metric '{metric_name}' reports {reported}; "
            f"did you mean '{hint[0]}'? (without the ema_ prefix: eval.use_ema adds it)"
        )


def monitor_mode(metric_name: str, monitor: str, mode: Optional[str], extras: Sequence[Dict[str, Any]] = ()) -> str:
    """The direction that makes ``eval.monitor`` better: the one the metric declares (``loss``: min;
    a torchmetrics class: its ``higher_is_better``), unless ``eval.monitor_mode`` sets it; a set mode
    that contradicts the declaration is a warning."""
    directions = _extra_directions(extras)
    if monitor in MONITORABLE_EVALUATION:
        declared: Optional[str] = "min"
    elif monitor in directions:
        declared = directions[monitor]
    else:
        declared = METRICS.build(metric_name).direction(monitor)
    if mode is None:
        if declared is None:
            raise ConfigError(
                f"eval.monitor '{monitor}': metric '{metric_name}' does not say whether higher or lower is better; set eval.monitor_mode=max or min"
            )
        return declared
    if declared is not None and mode != declared:
        log.warning(
            "eval.monitor_mode=%s, but a %s %s is better (metric '%s'): the best checkpoint is the one with the %s %s",
            mode,
            "higher" if declared == "max" else "lower",
            monitor,
            metric_name,
            "highest" if mode == "max" else "lowest",
            monitor,
        )
    return mode


def import_custom(names: Sequence[str], results: Sequence[Union[str, Path]] = ()) -> None:
    """Import the ``custom_imports`` modules (their registrations fill the registries).

    A module that lies in a results folder (a run folder; ``results``: the output root, compare's PATHs; the
    default output root: ``utils/import_place.py``) is refused before any of it runs. A module that does not import, because it
    does not exist or because an import inside it fails (a missing package, a misspelt name), is bad input:
    ConfigError naming the module, the failing import's file and line, and the fix.
    Any other exception raised by the module's code is a bug and keeps its traceback.
    """
    for name in names:
        check_import_place(name, results)
        try:
            importlib.import_module(name)
        except ImportError as err:
            if (
                isinstance(err, ModuleNotFoundError)
                and err.name is not None
                and (name == err.name or name.startswith(err.name + "."))
            ):
                raise ConfigError(
                    f"custom_imports: no module named '{name}'; give an importable module path (e.g. my_package.my_module) and make sure its folder is on PYTHONPATH"
                ) from None
            frames = [f for f in traceback.extract_tb(err.__traceback__) if not f.filename.startswith("<frozen")]
            where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
            raise ConfigError(
                f"custom_imports: module '{name}' does not import{where}: {err}; install the missing package or fix that import"
            ) from None
