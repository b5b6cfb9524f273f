"""What ``--mode pack`` stores of each sample of a dataset: the stored file bytes where there is a file.

Folder datasets keep their files' bytes as they are (JPEG stays JPEG, not decoded; a video its
frames, in the order the folder dataset reads them; an image and its mask); a dataset that holds its
samples in memory (digits, generated data) is stored as its untransformed tensor in ``.npy``
(``numpy.save``, ``allow_pickle=False``: lossless, and loading it runs no code).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Callable, List, Optional, Tuple, Union

import numpy as np
import torch

from utils.data.identity import sample_keys
from utils.data.string_table import StringTable
from utils.errors import DataError

Member = Tuple[str, Union[Path, bytes]]  # (extension, the file it is stored in, or its bytes)


def _npy(tensor: Any) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(torch.as_tensor(tensor).numpy()), allow_pickle=False)
    return buffer.getvalue()


def classes_of(dataset: Any) -> Optional[List[Any]]:
    classes = getattr(dataset, "classes", None)
    return None if classes is None else list(classes)


class PackSource:
    """The samples of ``dataset`` (the registered dataset ``name``, built without transforms) as pack stores them:
    ``count`` samples with their ``keys()``, ``labels()``, ``stems()`` and each one's ``members(at)``.

    A dataset that reads through a source (``utils/data/sources/``: files, or a pack packed again) gives its
    source's samples for the task it declares; any other holds its samples in memory: tensors with one integer
    label each, stored as ``.npy``."""

    def __init__(self, dataset: Any, name: str) -> None:
        self.dataset, self.name = dataset, name
        self.source = getattr(dataset, "source", None)
        self.task = dataset.task if self.source is not None else "classification"
        self.classes = classes_of(dataset)
        if self.source is not None and self.source.origin:
            self.name = self.source.origin  # a pack packed again: the dataset it was packed from
        self.count = len(self.source) if self.source is not None else len(dataset)

    def keys(self) -> StringTable:
        """Each sample's key: each video's, for frame folders (not each clip's)."""
        if self.source is not None:
            return self.source.keys  # type: ignore[no-any-return]
        table = getattr(self.dataset, "key_table", None)
        return table() if callable(table) else StringTable.from_strings(sample_keys(self.dataset))

    def stems(self) -> StringTable:
        """Each image-and-mask pair's stem (the saliency maps' names); none for other tasks."""
        if self.task != "sod":
            return StringTable.from_strings([])
        return self.source.stems()  # type: ignore[no-any-return,union-attr]

    def labels(self) -> np.ndarray:
        """Each sample's class index; -1 for SOD."""
        if self.task == "sod":
            return np.full(self.count, -1, np.int64)
        if self.source is not None:
            return np.asarray(self.source.labels, np.int64)
        return np.fromiter((self._item(at)[1] for at in range(self.count)), np.int64, self.count)

    def members(self, at: int) -> List[Member]:
        """Sample ``at``'s members in order (an image; an image and its mask; a video's frames): file or bytes."""
        if self.source is not None:
            return self.source.members(at)  # type: ignore[no-any-return]
        return [("npy", _npy(self._item(at)[0]))]

    def _item(self, at: int) -> Tuple[torch.Tensor, int]:
        """An in-memory dataset's item as it gives it untransformed: a tensor and one integer label."""
        image, label = self.dataset[at]
        one_label = isinstance(label, (int, np.integer)) or (isinstance(label, torch.Tensor) and label.numel() == 1)
        if not isinstance(image, torch.Tensor) or not one_label:
            raise DataError(
                f"--mode pack: dataset '{self.name}' gives {type(image).__name__} items with {type(label).__name__} "
                "labels; it packs image, mask and video frame folders, and in-memory tensors with one integer label "
                "each (write generated SOD or video data as folders first)"
            )
        return image, int(label)


def sizes(members: List[Member]) -> List[Tuple[str, int]]:
    """Each member's extension and size in bytes, without reading a file."""
    return [(ext, len(data) if isinstance(data, bytes) else _read(data, os.stat).st_size) for ext, data in members]


def contents(members: List[Member]) -> List[Tuple[str, bytes]]:
    """Each member's extension and bytes."""
    return [(ext, data if isinstance(data, bytes) else _read(data, Path.read_bytes)) for ext, data in members]


def _read(path: Path, how: Callable[[Path], Any]) -> Any:
    """``how(path)``; a file that cannot be read (gone since the dataset listed it, no permission) as one line."""
    try:
        return how(path)
    except OSError as err:
        raise DataError(
            f"--mode pack cannot read '{path}' ({err.strerror or err}); fix the file, or remove it"
        ) from err
