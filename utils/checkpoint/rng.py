"""Capture and restore the random number generators a training step draws from.

Dropout, data augmentation in the main process and ``random``/``numpy`` calls in
user code all draw from process-global generators. Restoring the state captured
at a checkpoint makes the continuation draw exactly what an uninterrupted run
would have drawn from that point on.
"""

from __future__ import annotations

import contextlib
import logging
import random
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from utils.distributed.seed import seed_everything

log = logging.getLogger(__name__)


def numpy_state() -> Tuple[Any, ...]:
    """numpy's legacy random state with its key as an int64 tensor instead of an ndarray: a checkpoint
    then loads weights-only without numpy's array reconstruction on the allowlist (``safe_load.py``)."""
    name, key, *rest = np.random.get_state(legacy=True)
    return (name, torch.from_numpy(np.asarray(key, dtype=np.int64)), *rest)


def set_numpy_state(state: Tuple[Any, ...]) -> None:
    """Put back ``numpy_state()``'s tuple, or the ndarray form checkpoints before framework 0.4 hold."""
    name, key, *rest = state
    key = key.numpy() if isinstance(key, torch.Tensor) else key
    np.random.set_state((name, np.asarray(key, dtype=np.uint32), *rest))


def capture_rng() -> Dict[str, Any]:
    """The state of python's, numpy's, torch's CPU and every CUDA device's generator."""
    return {
        "python": random.getstate(),
        "numpy": numpy_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else [],
    }


def restore_rng(state: Dict[str, Any]) -> None:
    """Put back what ``capture_rng`` returned (CUDA states only for devices that exist here)."""
    random.setstate(state["python"])
    set_numpy_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    cuda: List[torch.Tensor] = state.get("cuda") or []
    if cuda and torch.cuda.is_available():
        count = torch.cuda.device_count()
        if len(cuda) != count:
            log.warning(
                "the checkpoint holds %d CUDA generator states, this process sees %d devices; restoring the first %d",
                len(cuda),
                count,
                min(len(cuda), count),
            )
        for index, value in enumerate(cuda[:count]):
            torch.cuda.set_rng_state(value, index)


@contextlib.contextmanager
def rng_untouched() -> Iterator[None]:
    """Whatever runs inside leaves every generator as it found it.

    Validation runs after its epoch's checkpoint (which holds the random state), and a
    resume skips a validation that was recorded: were its draws (a loader's seed, a random
    transform) to advance the training streams, the resumed run would not draw what an
    uninterrupted one draws."""
    state = capture_rng()
    try:
        yield
    finally:
        restore_rng(state)


def restore_rank_rng(states: Optional[List[Dict[str, Any]]], rank: int) -> bool:
    """Restore rank ``rank``'s entry of the per-rank list a checkpoint keeps; False when it has none."""
    if not states or rank >= len(states) or states[rank] is None:
        log.warning(
            "the checkpoint has no random state for rank %d; the random streams continue from the seed, so the run is not bit-identical to an uninterrupted one",
            rank,
        )
        return False
    restore_rng(states[rank])
    return True


def reseed_rank(seed: int, step: int, rank: int) -> None:
    """New streams for rank ``rank`` from (seed, step, rank): a resume on another world size cannot
    carry the per-rank streams over (which old rank's would a new one continue?)."""
    seed_everything(seed * 1_000_003 + step, rank)
