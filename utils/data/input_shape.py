"""One sample of the built data against ``model.input_size``: the shape the network is declared for.

``model.input_size`` sizes the lazy modules, the FLOP count and exports, and ``--mode
predict`` checks its inputs against it; a value that contradicts the data trains without
a word and misleads every one of them. Once the data is built, one sample must have as
many dimensions and channels; another height and width is a warning, since a network with
global pooling runs at any size. The sample is the val split's first, at the size the
network is evaluated (and predict's inputs are held) at: a read of the training split
outside training would count among the reads of a dataset that records or counts them.
It is read without changing what training draws (``utils/data/trial.py``). ``--mode test``
holds its test split to the size the checkpoint was trained at, as predict holds its inputs.
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional, Sequence

import torch

from utils.data.trial import drawing_nothing
from utils.errors import ConfigError, DataError

log = logging.getLogger(__name__)


def first_input(dataset: Any) -> Optional[torch.Tensor]:
    """The input of ``dataset[0]`` (the first entry of a tuple item, or the item), None when it is not a tensor."""
    if len(dataset) == 0:
        return None
    with drawing_nothing():  # random transforms: training draws what it would have drawn without this look
        item = dataset[0]
    inputs = item[0] if isinstance(item, (tuple, list)) else item
    return inputs if isinstance(inputs, torch.Tensor) else None


def _layout(size: Sequence[int]) -> str:
    return {3: " (channels, height, width)", 4: " (channels, frames, height, width)"}.get(len(size), "")


TASKS = (
    "classification",
    "sod",
    "video",
)  # the eval.metric values a dataset (or a packed split) may declare as its task


# a config of each task to start from, and the data.args that fit it (its own are its demo dataset's), named when
# a training run's data is of another task than its config's: data.name=image_mask_folder on the default classifier
TASK_CONFIGS = {
    "classification": ("configs/digits.yaml", ' "data.args={}"'),
    "sod": ("configs/sod_shapes.yaml", ' "data.args={size: 32}"'),  # the config's model.input_size
    "video": ("configs/video_moving_shapes.yaml", ' "data.args={clip_len: 6, num_clips: 3}"'),  # its clips
}


def check_task(dataset: Any, metric: str, data: Optional[Sequence[str]] = None) -> None:
    """DataError when ``dataset`` declares a ``task`` (packed shards: their index's) that is not ``eval.metric``'s:
    its samples and targets would reach a network and a metric of another task. ``data``: a training run's
    ``(data.name, data.root)``, whose config is the user's to choose, so the line names one of the data's task
    to start from (a checkpoint's task is fixed)."""
    task = getattr(dataset, "task", None)
    if task in TASKS and metric in TASKS and task != metric:
        start = ""
        if data is not None:
            config, args = TASK_CONFIGS[task]
            start = f"train it with a config of its task: --config {config} data.name={data[0]} data.root={data[1]}{args}, or "
        raise DataError(
            f"the data holds {task} samples, but eval.metric={metric}: the network and the metric are of another task; "
            f"{start}give {metric} data (for shards: a pack of {metric} data)"
        )


def check_input_shape(dataset: Any, input_size: Optional[Sequence[int]], metric: str = "") -> None:
    """DataError when ``dataset`` (the val split) is of another task than ``eval.metric`` (``check_task``);
    ConfigError when a sample of it has another number of dimensions or channels than ``model.input_size``;
    a warning naming both when only the height and width differ."""
    check_task(dataset, metric)
    sample = first_input(dataset) if input_size else None
    if sample is None or input_size is None:
        return
    shape: List[int] = list(sample.shape)
    given = list(input_size)
    if len(shape) != len(given) or shape[0] != given[0]:
        raise ConfigError(
            f"model.input_size={given} does not fit the data: a sample of the val split is {shape} after data.eval_transforms"
            f"{_layout(shape)}; set model.input_size={shape}"
        )
    if shape[1:] != given[1:]:
        log.warning(
            "model.input_size=%s, but a sample of the val split is %s after data.eval_transforms%s: the network runs at the data's size, "
            "while the FLOP count, lazy modules, export and predict's size check use model.input_size; set model.input_size=%s",
            given,
            shape,
            _layout(shape),
            shape,
        )


def check_test_size(dataset: Any, trained_at: Optional[Sequence[int]], fix: str) -> None:
    """``--mode test``: DataError when the test split reaches the network at another height x width than the
    checkpoint was trained at (``model.input_size``); ``fix``: the override that resizes it, as predict names it."""
    sample = first_input(dataset) if trained_at and len(trained_at) >= 2 else None
    if sample is None or trained_at is None or sample.dim() < 2:
        return
    (height, width), (want_h, want_w) = sample.shape[-2:], trained_at[-2:]
    if (height, width) != (want_h, want_w):
        raise DataError(
            f"the test split reaches the network at {width}x{height} (width x height, after data.eval_transforms), but the checkpoint "
            f"was trained at {want_w}x{want_h} (model.input_size={list(trained_at)}); resize the test data to {want_w}x{want_h}, "
            f"or let the test resize it: {fix}"
        )
