"""Count the host reads and Python-level collectives that the project's own files make.

A host read is a call that makes Python wait for a tensor's value (``item``,
``tolist``, ``cpu``, ``numpy``, ``bool(t)``, ``float(t)``, ``int(t)``, ``f"{t}"``,
...): on a GPU each one waits until the device has finished all queued work. A
collective (``all_reduce``, ``barrier``, ...) waits for every rank. Only calls
whose caller is a file of the project (``main.py``, ``utils/``, the plugin
folders) count: what PyTorch does inside its own functions is PyTorch's cost.
Evaluation (validation, the test, and the hooks they call, e.g. the picture
hooks) is not counted: it reads per evaluated batch, whatever the training
steps do, and what it reads depends on how well the model has trained.

A diagnostic, used by the tests that keep the training loop free of reads and by
``benchmarks/bench_host_reads.py``; nothing in a run imports it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path
from typing import Any, Callable, Counter, Dict, Iterator

import torch
import torch.distributed as dist

ROOT = Path(__file__).resolve().parents[1]
READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__float__", "__int__", "__index__", "__format__")
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "all_to_all",
    "barrier",
    "send",
    "recv",
)
OWN = tuple(str(ROOT / name) for name in ("main.py", "utils", "backbone", "module", "network", "loss", "hook"))
ENGINE = str(ROOT / "utils" / "engine")
EVALUATION = ("validate", "evaluate", "test")  # the engine's evaluation passes and the hooks they call


def _in_evaluation(frame: Any) -> bool:
    """Whether ``frame`` runs inside one of the engine's evaluation passes."""
    while frame is not None:
        if frame.f_code.co_name in EVALUATION and frame.f_code.co_filename.startswith(ENGINE):
            return True
        frame = frame.f_back
    return False


def _counting(kind: str, fn: Callable, counts: Counter) -> Callable:
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        caller = sys._getframe(1)
        if caller.f_code.co_filename.startswith(OWN) and not _in_evaluation(caller):
            counts[f"{kind} {os.path.relpath(caller.f_code.co_filename, ROOT)}:{caller.f_lineno}"] += 1
        return fn(*args, **kwargs)

    return wrapper


@contextlib.contextmanager
def counting(counts: Counter) -> Iterator[Counter]:
    """Count into ``counts`` (``"read file:line"`` / ``"collective file:line"``) while inside: the reading
    methods of ``torch.Tensor`` and the collectives of ``torch.distributed`` are wrapped, then restored."""
    saved = [(torch.Tensor, name, torch.Tensor.__dict__.get(name)) for name in READS] + [
        (dist, name, getattr(dist, name)) for name in COLLECTIVES if hasattr(dist, name)
    ]
    for owner, name, _ in saved:
        kind = "read" if owner is torch.Tensor else "collective"
        setattr(owner, name, _counting(kind, getattr(owner, name), counts))
    try:
        yield counts
    finally:
        for owner, name, original in saved:
            if original is None:
                delattr(owner, name)  # inherited from torch._C.TensorBase
            else:
                setattr(owner, name, original)


def totals(sites: Dict[str, int]) -> Dict[str, int]:
    """``{"read": n, "collective": m}`` from the per-site counts."""
    out: Dict[str, int] = {"read": 0, "collective": 0}
    for site, n in sites.items():
        out[site.split(" ", 1)[0]] += n
    return out
