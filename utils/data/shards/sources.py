"""What ``--mode pack`` stores of each sample of a dataset: the stored file bytes where there is a file.

Folder datasets keep their files' bytes as they are (JPEG stays JPEG, not decoded; a video its
frames, in the order the folder dataset reads them); a
dataset that holds its samples in memory (digits, generated data) is stored as its
untransformed tensor in ``.npy`` (``numpy.save``, ``allow_pickle=False``: lossless, and
loading it runs no code).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from utils.data.identity import sample_keys
from utils.errors import DataError

Sample = Tuple[Dict[str, bytes], Dict[str, Any]]  # members (ext -> bytes), index entry


def _ext(path: str) -> str:
    return Path(path).suffix.lower().lstrip(".") or "bin"


def _npy(tensor: Any) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(torch.as_tensor(tensor).numpy()), allow_pickle=False)
    return buffer.getvalue()


def task_of(dataset: Any) -> str:
    """``sod`` for image + mask pairs, ``video`` for frame folders, else ``classification``."""
    if hasattr(dataset, "frame_counts") and hasattr(dataset, "folders"):
        return "video"
    return "sod" if hasattr(dataset, "files") and hasattr(dataset, "pipeline") else "classification"


def _video(dataset: Any, at: int, key: str) -> Sample:
    from utils.data.datasets.video_frames_folder import list_frames  # the frame order the folder dataset reads

    folder = dataset.folders[at]
    members = {f"f{k:06d}.{_ext(name)}": (folder / name).read_bytes() for k, name in enumerate(list_frames(folder))}
    entry = {"key": key, "name": dataset.names[at], "label": int(dataset.labels[at])}
    return members, {**entry, "frames": list(members)}


def classes_of(dataset: Any) -> Optional[List[Any]]:
    classes = getattr(dataset, "classes", None)
    return None if classes is None else list(classes)


def _files(dataset: Any) -> Optional[List[Tuple[str, int]]]:
    """image_folder's ``(path, class index)`` list, or None for a dataset of another kind."""
    files = getattr(dataset, "samples", None)
    if isinstance(files, list) and files and isinstance(files[0], tuple) and isinstance(files[0][0], str):
        return files
    return None


def sample_at(dataset: Any, name: str, at: int, key: str) -> Sample:
    """Sample ``at`` of ``dataset`` (the registered dataset ``name``, built without transforms) as stored, under ``key``."""
    task = task_of(dataset)
    if task == "video":
        return _video(dataset, at, key)
    if task == "sod":
        stem, image, mask = dataset.files[at]
        members = {f"image.{_ext(str(image))}": Path(image).read_bytes()}
        members[f"mask.{_ext(str(mask))}"] = Path(mask).read_bytes()
        return members, {"key": key, "stem": stem, "image": next(iter(members)), "mask": list(members)[1]}
    files = _files(dataset)
    if files is not None:
        path, label = files[at]
        return {_ext(path): Path(path).read_bytes()}, {"key": key, "image": _ext(path), "label": int(label)}
    image, label = dataset[at]  # in memory: the item as the dataset gives it untransformed
    one_label = isinstance(label, (int, np.integer)) or (isinstance(label, torch.Tensor) and label.numel() == 1)
    if not isinstance(image, torch.Tensor) or not one_label:
        raise DataError(
            f"--mode pack: dataset '{name}' gives {type(image).__name__} items with {type(label).__name__} labels; "
            "it packs image, mask and video frame folders, and in-memory tensors with one integer label each "
            "(write generated SOD or video data as folders first)"
        )
    return {"npy": _npy(image)}, {"key": key, "image": "npy", "label": int(label)}


def packed_keys(dataset: Any) -> List[str]:
    """The key of each sample that pack stores: each video's, for frame folders (not each clip's)."""
    return list(dataset.keys) if task_of(dataset) == "video" else sample_keys(dataset)


def samples_of(dataset: Any, name: str, keys: List[str], shuffled: bool = False) -> Iterator[Tuple[int, Sample]]:
    """``(position, sample)`` for each sample of ``dataset`` under its ``keys`` (``packed_keys``): in the dataset's
    order, or in a shuffle seeded by 0 (the same data packs to the same shards)."""
    order = torch.randperm(len(keys), generator=torch.Generator().manual_seed(0)).tolist() if shuffled else None
    for at in order if order is not None else range(len(keys)):
        yield at, sample_at(dataset, name, at, keys[at])
