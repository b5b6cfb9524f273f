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


def _videos(dataset: Any) -> Iterator[Sample]:
    from utils.data.datasets.video_frames_folder import list_frames  # the frame order the folder dataset reads

    for video, folder in enumerate(dataset.folders):
        names = list_frames(folder)
        members = {f"f{k:06d}.{_ext(name)}": (folder / name).read_bytes() for k, name in enumerate(names)}
        entry = {"key": dataset.keys[video], "name": dataset.names[video], "label": int(dataset.labels[video])}
        yield members, {**entry, "frames": list(members)}


def classes_of(dataset: Any) -> Optional[List[Any]]:
    classes = getattr(dataset, "classes", None)
    return None if classes is None else list(classes)


def samples_of(dataset: Any, name: str) -> Iterator[Sample]:
    """Each sample of ``dataset`` (the registered dataset ``name``, built without transforms) to store."""
    if task_of(dataset) == "video":
        yield from _videos(dataset)
        return
    keys = sample_keys(dataset)
    if task_of(dataset) == "sod":
        for key, (stem, image, mask) in zip(keys, dataset.files):
            members = {f"image.{_ext(str(image))}": Path(image).read_bytes()}
            members[f"mask.{_ext(str(mask))}"] = Path(mask).read_bytes()
            yield members, {"key": key, "stem": stem, "image": next(iter(members)), "mask": list(members)[1]}
        return
    files = getattr(dataset, "samples", None)
    if isinstance(files, list) and files and isinstance(files[0], tuple) and isinstance(files[0][0], str):
        for key, (path, label) in zip(keys, files):  # image_folder's (path, class index)
            ext = _ext(path)
            yield {ext: Path(path).read_bytes()}, {"key": key, "image": ext, "label": int(label)}
        return
    for at, key in enumerate(keys):  # in memory: the item as the dataset gives it untransformed
        image, label = dataset[at]
        one_label = isinstance(label, (int, np.integer)) or (isinstance(label, torch.Tensor) and label.numel() == 1)
        if not isinstance(image, torch.Tensor) or not one_label:
            raise DataError(
                f"--mode pack: dataset '{name}' gives {type(image).__name__} items with {type(label).__name__} labels; "
                "it packs image, mask and video frame folders, and in-memory tensors with one integer label each "
                "(write generated SOD or video data as folders first)"
            )
        yield {"npy": _npy(image)}, {"key": key, "image": "npy", "label": int(label)}
