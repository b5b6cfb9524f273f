"""``data.name=shards``: the dataset a pack was written from, read from the pack (``data.root=DIR`` or
``s3://bucket/prefix``, as ``--mode pack`` wrote it).

A pack is a source of bytes under the datasets users already name (``utils/data/sources/``):
``image_folder``, ``image_mask_folder`` and ``video_frames_folder`` read one as they read a folder of
files. ``shards`` picks the one whose declared ``task`` is the pack's (classification, also an in-memory
dataset's ``.npy`` tensors; SOD; video), read from its index, and builds it with the ``data.args`` it takes; an argument
only another task's dataset takes, set to other than its default, is a warning that it does nothing.
The arguments ``shards`` accepts are those of the three datasets, read from their signatures.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Dict, Optional

from utils.data.datasets.image_folder import ImageFolder
from utils.data.datasets.image_mask_folder import ImageMaskFolder
from utils.data.datasets.video_frames_folder import VideoFramesFolder
from utils.data.shards.reader import packed_task
from utils.data.sources.open import warn_once
from utils.data.sources.pack import PACK_INERT, check_folders
from utils.errors import ConfigError
from utils.registry import DATASETS

READERS = {dataset.task: dataset for dataset in (ImageFolder, ImageMaskFolder, VideoFramesFolder)}


def _parameters() -> Dict[str, inspect.Parameter]:
    """The parameters of the three datasets, keyword-only (the first one's where two share a name)."""
    merged: Dict[str, inspect.Parameter] = {}
    for dataset in READERS.values():
        for name, parameter in inspect.signature(dataset.__init__).parameters.items():
            if name != "self":
                merged.setdefault(name, parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))
    return merged


def _types() -> Dict[str, Any]:
    """Their annotations, resolved (the config checks each data.args value against its dataset's type)."""
    merged: Dict[str, Any] = {}
    for dataset in READERS.values():
        for name, hint in typing.get_type_hints(dataset.__init__, include_extras=True).items():
            merged.setdefault(name, hint)
    return merged


def shards(split: str = "train", root: Optional[str] = None, transform: Optional[Callable] = None, **args: Any) -> Any:
    """The dataset of the pack's task over ``root``'s ``split`` (see the module doc)."""
    if root is None:
        raise ConfigError("dataset shards needs data.root=<folder or s3://bucket/prefix written by --mode pack>")
    task = packed_task(root, split)
    dataset = READERS[task]
    takes = inspect.signature(dataset.__init__).parameters
    for name, value in args.items():
        if name not in takes and value != _parameters()[name].default:
            warn_once(f"data.args.{name}={value!r} does nothing: the shards in '{root}' hold {task} data")
    return dataset(split=split, root=root, transform=transform, **{k: v for k, v in args.items() if k in takes})


shards.__signature__ = inspect.Signature(list(_parameters().values()))  # type: ignore[attr-defined]
shards.__annotations__ = _types()
shards.INERT_ARGS = PACK_INERT  # type: ignore[attr-defined]
shards.check_folders = check_folders  # type: ignore[attr-defined]
# the data.args key that sizes an eval sample, per task (--mode predict): the reading dataset's own
shards.SIZING = {task: getattr(dataset, "SIZING", None) for task, dataset in READERS.items()}  # type: ignore[attr-defined]
DATASETS.register("shards")(shards)
