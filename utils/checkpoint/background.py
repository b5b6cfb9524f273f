"""Checkpoints written in the background (``train.async_checkpoint``).

The training thread only copies the state to CPU memory (pinned, when it comes
from a GPU) and hands the copy to one writer thread, which serializes, hashes,
fsyncs, renames, links and rotates it exactly as a synchronous save does
(``CheckpointStore.save``). At most one write is in flight: the next checkpoint
point waits for it first. A write that failed raises its error (the same
one-line ``CheckpointError``) at the next checkpoint point or at ``wait()``,
so it is never lost; a crash mid-write leaves the previous checkpoint valid,
because a numbered file appears only once it is complete.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional

import torch

from utils.tree import map_tensors, tensors_in

log = logging.getLogger(__name__)


def cpu_copy(obj: Any, reuse: Any = None) -> Any:
    """``obj`` with every tensor (in any container, ``utils/tree.py``) copied to CPU memory the training
    thread no longer touches; GPU tensors go to pinned memory, copied asynchronously, then synchronized.

    ``reuse``: the previous checkpoint's copy, whose write has ended. Its tensors of the same
    shape and dtype are written into instead of new ones: a fresh 300 MB allocation costs page
    faults on every page, which make up most of a copy's time.
    """
    from_gpu = set()
    previous = iter(list(tensors_in(reuse)))  # the same walk over the same structure: the same order; each used once

    def copy(item: torch.Tensor) -> torch.Tensor:
        old = next(previous, None)
        pinned = item.device.type == "cuda"
        reusable = old is not None and old.shape == item.shape and old.dtype == item.dtype and old.is_pinned() == pinned
        target = old if reusable else torch.empty(item.shape, dtype=item.dtype, pin_memory=pinned)
        target.copy_(item.detach(), non_blocking=pinned)
        if pinned:
            from_gpu.add(item.device)
        return target

    result = map_tensors(copy, obj)  # numbers, strings, numpy RNG states: not changed by training afterwards
    for device in from_gpu:
        torch.cuda.synchronize(device)
    return result


class BackgroundWriter:
    """Runs one write at a time on a thread of its own; remembers its error for the next caller."""

    def __init__(self) -> None:
        self._thread: Optional[threading.Thread] = None
        self._error: Optional[BaseException] = None

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, write: Callable[[], Any]) -> None:
        """Start ``write()`` in the background, after the previous write ended (its error is raised here)."""
        self.wait()

        def run() -> None:
            try:
                write()
            except BaseException as err:  # noqa: BLE001 - kept and raised in the training thread by wait()
                self._error = err

        self._thread = threading.Thread(target=run, name="checkpoint-writer", daemon=False)
        self._thread.start()

    def wait(self) -> None:
        """Block until the write in flight ended; raise what it failed with (once)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error
