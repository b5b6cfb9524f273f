"""Which data a run trains on: the sample keys of a dataset and the identity a checkpoint keeps.

A dataset names its samples with ``sample_keys()`` (relative paths for folders, stable names
for generated data); one without it is named by index. The identity of the training split,
``{classes, samples, fingerprint}`` (the fingerprint: SHA-256 of the keys in order), is stored in
every checkpoint, and a resume on data with other classes, another sample count or another
file list is refused (``utils/checkpoint/guard.py``): ``data.root`` may move, the data may not change.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Mapping, Optional


def sample_keys(dataset: Any) -> List[str]:
    """The keys of ``dataset``'s samples in index order: its own ``sample_keys()``, else the indices."""
    keys = getattr(dataset, "sample_keys", None)
    return [str(k) for k in keys()] if callable(keys) else [str(i) for i in range(len(dataset))]


def data_identity(dataset: Any) -> Dict[str, Any]:
    """``{classes, samples, fingerprint}`` of ``dataset`` (the training split)."""
    digest = hashlib.sha256()
    for key in sample_keys(dataset):
        digest.update(key.encode("utf-8", "surrogateescape") + b"\n")
    classes = getattr(dataset, "classes", None)
    return {
        "classes": None if classes is None else [str(c) for c in classes],
        "samples": len(dataset),
        "fingerprint": digest.hexdigest()[:16],
    }


def identity_differences(saved: Optional[Mapping[str, Any]], current: Optional[Mapping[str, Any]]) -> List[str]:
    """``"what: old -> new"`` for each part of two identities that differs (none when either is unknown)."""
    if not saved or not current:
        return []
    diffs = []
    if saved.get("classes") != current.get("classes"):
        diffs.append(f"classes: {_classes(saved.get('classes'))} -> {_classes(current.get('classes'))}")
    if saved.get("samples") != current.get("samples"):
        diffs.append(f"training samples: {saved.get('samples')} -> {current.get('samples')}")
    elif saved.get("fingerprint") != current.get("fingerprint"):
        diffs.append(
            f"training file list: fingerprint {saved.get('fingerprint')} -> {current.get('fingerprint')} (same count, other files)"
        )
    return diffs


def _classes(names: Optional[List[str]]) -> str:
    if names is None:
        return "none"
    shown = ", ".join(names[:6]) + (f" ... ({len(names)})" if len(names) > 6 else "")
    return f"[{shown}]"
