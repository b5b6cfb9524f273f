"""torchmetrics classes by name (``eval.extra_metrics``), exact across ranks.

``eval.extra_metrics: [{name: MulticlassF1Score, average: macro}, ...]`` takes any
torchmetrics class; ``num_classes`` and ``task`` are filled from the data where the
class takes them. Each is reported under its snake_case class name
(``multiclass_f1_score``), or the entry's ``as``, next to the task's own metrics.

Exactness: torchmetrics' own synchronisation crashes on a rank that holds no
sample for list states (``MulticlassAveragePrecision``) and deadlocks when only one
rank computes. Here no torchmetrics state is ever synchronised: each rank keeps its
slice's predictions and targets, every rank gathers all slices, puts them back in
the dataset's order (``SliceSampler``: rank r holds samples r, r + w, r + 2w, ...)
and runs each metric once on the whole split, as one process does.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from utils.distributed.ops import all_gather_objects, get_world_size
from utils.errors import ConfigError, RegistryError, first_line
from utils.metrics.base import Metric, target_tensor
from utils.registry import METRICS

# where torchmetrics keeps its metric classes (the top level re-exports most of them)
_MODULES = ("torchmetrics", "torchmetrics.classification", "torchmetrics.regression", "torchmetrics.segmentation")
# the torchmetrics task each built-in metric's data is (a user's metric: give task/num_classes yourself)
TASKS = {"classification": "multiclass", "video": "multiclass", "sod": "binary"}
_OWN_KEYS = ("name", "as")


def _metric_classes() -> Dict[str, type]:
    try:
        import torchmetrics
    except ImportError:
        raise ConfigError(
            "eval.extra_metrics needs torchmetrics: pip install -e . (or pip install torchmetrics)"
        ) from None
    found: Dict[str, type] = {}
    for module_name in _MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a submodule of another torchmetrics version
            continue
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, torchmetrics.Metric)
                and not name.startswith("_")
                and name != "Metric"
            ):
                found.setdefault(name, value)
    return found


def metric_class(name: str) -> type:
    """The torchmetrics class called ``name``; RegistryError naming the closest ones."""
    classes = _metric_classes()
    if name in classes:
        return classes[name]
    close = difflib.get_close_matches(str(name), list(classes), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see https://lightning.ai/docs/torchmetrics"
    raise RegistryError(f"eval.extra_metrics: '{name}' is not a torchmetrics metric class{hint}")


def snake_case(name: str) -> str:
    """``MulticlassF1Score`` -> ``multiclass_f1_score``, ``MulticlassAUROC`` -> ``multiclass_auroc``."""
    name = re.sub(r"(?<=[A-Z])(?=[A-Z][a-z])", "_", name)
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def reported_name(spec: Dict[str, Any]) -> str:
    """The entry's ``as``, else its class name in snake case."""
    return str(spec["as"]) if "as" in spec else snake_case(str(spec["name"]))


def extra_directions(specs: Sequence[Dict[str, Any]]) -> Dict[str, Optional[str]]:
    """Each entry's reported name -> ``max``/``min`` from the class's ``higher_is_better`` (None: undeclared)."""
    out: Dict[str, Optional[str]] = {}
    for spec in specs:
        better = getattr(metric_class(spec["name"]), "higher_is_better", None)
        out[reported_name(spec)] = None if better is None else ("max" if better else "min")
    return out


DATA_CLASSES = "the data has {n} classes"
NETWORK_CLASSES = "the network outputs {n} class scores (model.args.num_classes)"


def check_extra_classes(
    specs: Sequence[Dict[str, Any]], num_classes: Optional[int], source: str = DATA_CLASSES
) -> None:
    """ConfigError for an entry whose own ``num_classes`` contradicts ``num_classes`` (``source``: the
    data's class count, or the network's outputs when the config is checked)."""
    for i, spec in enumerate(specs):
        given = spec.get("num_classes")
        if num_classes is not None and given is not None and given != num_classes:
            raise ConfigError(
                f"eval.extra_metrics[{i}] ({spec['name']}) has num_classes={given!r}, but {source.format(n=num_classes)}; "
                f"leave num_classes out (it is filled in from the data) or set it to {num_classes}"
            )


# what evaluate() reports beside the metrics (utils/engine/evaluate.py), and the prefix of the EMA's pass (eval.use_ema)
EVALUATION_NAMES = ("loss", "samples")
EMA_PREFIX = "ema_"


def check_reported_names(specs: Sequence[Dict[str, Any]], task_metric: str) -> None:
    """ConfigError for an ``as`` that is not a plain name (a string usable as a key, a TensorBoard tag, a monitor),
    and for an entry reported under a name the task's metric, the evaluation (``loss``, ``samples``) or an
    earlier entry already reports: one of the two values would replace the other in silence."""
    task_names = METRICS.build(task_metric).reported_names() or []
    taken = {
        **{name: f"eval.metric={task_metric}" for name in task_names},
        **{name: "every evaluation" for name in EVALUATION_NAMES},
    }
    for i, spec in enumerate(specs):
        alias = spec.get("as")
        if "as" in spec and (not isinstance(alias, str) or not alias.isidentifier()):
            raise ConfigError(
                f"config key 'eval.extra_metrics[{i}].as' must be a plain name (letters, digits and _, not starting with a digit; "
                f"e.g. as: f1_macro), got {alias!r}"
            )
        name = reported_name(spec)
        if name.startswith(EMA_PREFIX):
            raise ConfigError(
                f"eval.extra_metrics[{i}] ({spec['name']}) would be reported as '{name}', but names starting with {EMA_PREFIX} are the EMA's "
                f"(eval.use_ema reports {EMA_PREFIX}<name> for each name); give it another name with as: (e.g. as: {name[len(EMA_PREFIX) :] or 'extra'})"
            )
        if name in taken:
            raise ConfigError(
                f"eval.extra_metrics[{i}] ({spec['name']}) would be reported as '{name}', a name {taken[name]} already reports, "
                f"and one value would replace the other; give it another name with as: (e.g. as: {name}_2)"
            )
        taken[name] = f"eval.extra_metrics[{i}]"


def build_extras(
    specs: Sequence[Dict[str, Any]], task_metric: str, num_classes: Optional[int], source: str = DATA_CLASSES
) -> Dict[str, Any]:
    """The torchmetrics instances of ``eval.extra_metrics`` by reported name; ConfigError for an
    entry whose arguments the class refuses, whose ``num_classes`` contradicts ``num_classes``
    (see ``check_extra_classes``), or whose name is not a plain one or is already reported (``check_reported_names``)."""
    check_extra_classes(specs, num_classes, source)
    check_reported_names(specs, task_metric)
    built: Dict[str, Any] = {}
    for i, spec in enumerate(specs):
        cls = metric_class(spec["name"])
        args = {k: v for k, v in spec.items() if k not in _OWN_KEYS}
        takes = inspect.signature(cls).parameters
        if "task" in takes and "task" not in args and task_metric in TASKS:
            args["task"] = TASKS[task_metric]
        if "num_classes" in takes and "num_classes" not in args and num_classes is not None:
            args["num_classes"] = int(num_classes)
        name = reported_name(spec)
        try:
            built[name] = cls(**args, sync_on_compute=False)  # never torchmetrics' own sync: see the module's docstring
        except (TypeError, ValueError) as err:
            raise ConfigError(f"eval.extra_metrics[{i}] ({spec['name']}) with arguments {args}: {err}") from None
    return built


# what the task's metric passes to the extra metrics (``WithExtraMetrics.update``), as a description
_FAKE = {
    "multiclass": "scores [4, {c}] (float) and class indices [4]",
    "binary": "logits [2, 1, 8, 8] (float) and a 0/1 mask [2, 1, 8, 8]",
}
_FITTING = {"multiclass": "MulticlassF1Score, MulticlassAccuracy", "binary": "BinaryF1Score, BinaryJaccardIndex"}


def _fake_batch(task: str, num_classes: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """A tiny batch of the prediction and target shapes the task passes to the extra metrics."""
    generator = torch.Generator().manual_seed(0)  # the run's random streams stay untouched
    if task == "binary":
        return torch.randn(2, 1, 8, 8, generator=generator), torch.randint(0, 2, (2, 1, 8, 8), generator=generator)
    return torch.randn(4, num_classes, generator=generator), torch.arange(4) % num_classes


def check_extras(specs: Sequence[Dict[str, Any]], task_metric: str, num_classes: Optional[int]) -> None:
    """When the config is checked: each entry builds (``num_classes``: the network's outputs) and
    takes a tiny batch of the task's outputs; a metric for other data (``MeanSquaredError`` on a
    classifier's scores) is a ConfigError naming what it was given."""
    built = build_extras(specs, task_metric, num_classes, NETWORK_CLASSES)
    task = TASKS.get(task_metric)
    if task is None:
        return  # a user's task: its outputs are unknown here
    for i, (spec, metric) in enumerate(zip(specs, built.values())):
        width = num_classes if isinstance(num_classes, int) else spec.get("num_classes")
        width = width if isinstance(width, int) and width >= 1 else 2  # the shape, not the width, is what is tried then
        preds, targets = _fake_batch(task, width)
        try:
            with warnings.catch_warnings():  # e.g. "no positive samples": a fake batch's, not the user's
                warnings.simplefilter("ignore")
                metric.update(preds, targets)
                metric.compute()
        except (ValueError, RuntimeError, TypeError, IndexError) as err:
            reason = first_line(err)
            raise ConfigError(
                f"eval.extra_metrics[{i}] ({spec['name']}) does not fit the outputs of eval.metric={task_metric}: given {_FAKE[task].format(c=width)}, "
                f"it raised {type(err).__name__}: {reason}; choose a {task} metric (e.g. {_FITTING[task]})"
            ) from None
        metric.reset()


def _in_dataset_order(slices: List[Optional[torch.Tensor]]) -> torch.Tensor:
    """Rank r's j-th row is sample r + j * w (``SliceSampler``); any other split of the rows
    (another sampler) is concatenated in rank order."""
    parts = [s for s in slices if s is not None]
    total, w = sum(len(s) for s in parts), len(slices)
    sizes = [0 if s is None else len(s) for s in slices]
    if w == 1 or sizes != [len(range(r, total, w)) for r in range(w)]:
        return torch.cat(parts)
    out = torch.empty((total, *parts[0].shape[1:]), dtype=parts[0].dtype)
    for r, part in enumerate(slices):
        if part is not None:
            out[r::w] = part
    return out


class WithExtraMetrics(Metric):
    """The task's metric (sums, reduced exactly) plus torchmetrics classes computed on the whole split."""

    def __init__(self, base: Metric, extras: Dict[str, Any]) -> None:
        super().__init__()
        self.base, self.extras = base, extras
        self.preds: List[torch.Tensor] = []
        self.targets: List[torch.Tensor] = []

    def __getattr__(self, name: str) -> Any:  # the task metric's own helpers (prediction_writer, topk, ...)
        if name in ("base", "extras"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def reset(self) -> None:
        self.base.reset()
        self.preds, self.targets = [], []

    def update(self, outputs: Any, targets: Any) -> None:
        self.base.update(outputs, targets)
        labels = target_tensor(targets, "label", "mask")
        if labels.is_floating_point():  # a mask of 0/1 (or soft) values: binary targets
            labels = (labels >= 0.5).long()
        self.preds.append(outputs.detach().float().cpu())
        self.targets.append(labels.detach().cpu())

    def prediction_writer(self, folder: Any) -> Any:
        return self.base.prediction_writer(folder)

    def reported_names(self) -> Optional[List[str]]:
        names = self.base.reported_names()
        return None if names is None else [*names, *self.extras]

    def direction(self, name: str) -> Optional[str]:
        if name in self.extras:
            better = getattr(self.extras[name], "higher_is_better", None)
            return None if better is None else ("max" if better else "min")
        return self.base.direction(name)

    def result(self) -> Dict[str, float]:
        results = self.base.result()
        mine = (torch.cat(self.preds), torch.cat(self.targets)) if self.preds else None
        slices = all_gather_objects(mine) if get_world_size() > 1 else [mine]
        if all(s is None for s in slices):
            return results
        preds = _in_dataset_order([None if s is None else s[0] for s in slices])
        targets = _in_dataset_order([None if s is None else s[1] for s in slices])
        for name, metric in self.extras.items():
            metric.reset()
            metric.update(preds, targets)
            value = metric.compute()
            value = torch.as_tensor(value).double()
            if value.numel() == 1:
                results[name] = value.item()
            else:  # average=None and friends: one value per class
                results.update({f"{name}_{i}": v for i, v in enumerate(value.flatten().tolist())})
        return results
