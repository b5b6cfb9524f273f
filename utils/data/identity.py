"""Which data a run trains on: the sample keys of a dataset and the identity a checkpoint keeps.

A dataset names its samples with ``sample_keys()`` (relative paths for folders, stable names
for generated data); one without it is named by index. A dataset that holds its keys in a
:class:`~utils.data.string_table.StringTable` gives it by ``key_table()``: the identity and
``train.record_samples`` then read that table, with no list of the keys made. The identity of the training split,
``{classes, samples, fingerprint, order}`` (the fingerprint: SHA-256 of the keys in order; the order: how the
epochs are drawn), is stored in every checkpoint, and a resume on data with other classes, another sample count
or another file list is refused (``utils/checkpoint/guard.py``): ``data.root`` may move, the data may not change.
A checkpoint whose epochs were drawn another way (an older version) resumes at the start of its interrupted epoch.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from utils.data.index_shuffle import ORDER
from utils.data.string_table import ENCODING, ERRORS, StringTable

OLD_ORDER = "torch.randperm(seed + epoch)"  # how versions before the index shuffle drew an epoch: no "order" key


def key_table(dataset: Any) -> Optional[StringTable]:
    """The table of ``dataset``'s sample keys, when it keeps one (``key_table()``)."""
    own = getattr(dataset, "key_table", None)
    return own() if callable(own) else None


def sample_keys(dataset: Any) -> Sequence[str]:
    """The keys of ``dataset``'s samples in index order: its key table, its own ``sample_keys()``, else the indices."""
    table = key_table(dataset)
    if table is not None:
        return table
    keys = getattr(dataset, "sample_keys", None)
    return [str(k) for k in keys()] if callable(keys) else [str(i) for i in range(len(dataset))]


def relative_key(path: str, root: str) -> str:
    """``os.path.relpath(path, root)``, by cutting ``root + "/"`` off ``path`` where that gives the same (``path``
    under ``root``, its rest without ``.``, ``..`` or empty parts): a million relpaths cost 5 s, the cuts 0.2 s."""
    prefix = "" if root == "." else root if root.endswith("/") else root + "/"
    rest = path[len(prefix) :]
    wrapped = f"/{rest}/"
    if path.startswith(prefix) and not rest.startswith("/") and "//" not in wrapped:
        if "/./" not in wrapped and "/../" not in wrapped:
            return rest
    return os.path.relpath(path, root)


def data_identity(dataset: Any) -> Dict[str, Any]:
    """``{classes, samples, fingerprint, order}`` of ``dataset`` (the training split)."""
    table = key_table(dataset)
    if table is not None:
        fingerprint = table.sha256()
    else:
        digest = hashlib.sha256()
        for key in sample_keys(dataset):
            digest.update(key.encode(ENCODING, ERRORS) + b"\n")
        fingerprint = digest.hexdigest()
    classes = getattr(dataset, "classes", None)
    return {
        "classes": None if classes is None else [str(c) for c in classes],
        "samples": len(dataset),
        "fingerprint": fingerprint[:16],
        "order": ORDER,
    }


def order_change(saved: Optional[Mapping[str, Any]], current: Optional[Mapping[str, Any]]) -> Optional[Tuple[str, str]]:
    """``(old, new)`` when two identities draw their epochs differently (None when they agree, or this run's is
    unknown): the interrupted epoch's remaining samples are then not the rest of the epoch it began. A checkpoint
    without an identity (framework 0.3.0 and older) drew them as every version before the index shuffle did."""
    if not current:
        return None
    old, new = str((saved or {}).get("order", OLD_ORDER)), str(current.get("order", OLD_ORDER))
    return None if old == new else (old, new)


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
