"""Prefetching: load the next batches while the current one is trained on.

``thread``: a background thread (prefetch_generator's ``BackgroundGenerator``)
pulls batches from the loader into a bounded queue. ``cuda``: the next batch is
copied to the GPU on a side stream while the current one is computed.
``PrefetchLoader`` wraps a loader and keeps ``len()``, ``sampler``, ``dataset``
and ``batch_size`` of the wrapped loader, so the training loop does not change.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Iterable, Iterator, Optional, Sequence, Tuple

import torch
from prefetch_generator import BackgroundGenerator
from torch.utils.data import DataLoader, default_collate

from utils.data.batch import to_device
from utils.data.normalize import Normalize
from utils.distributed.device import need_cuda
from utils.model.memory_format import inputs_channels_last
from utils.tree import tensors_in

log = logging.getLogger(__name__)

_POLL_S = 0.05  # how often a blocked producer or consumer looks at the other side


class _Done:
    """Queue marker: the source is exhausted."""


def stop_workers(iterator: Any) -> None:
    """End the worker processes of a DataLoader iterator left before its end (a ``break``, an error).

    Left to the garbage collector, torch's ``__del__`` shuts them down in whichever thread collects
    the iterator, at any later moment: there a worker's unread results could keep it from exiting,
    and each waits ``MP_STATUS_CHECK_INTERVAL`` (5 s) before it is terminated. Persistent workers
    serve the next epoch and are left alone; an exhausted iterator has stopped its own already."""
    shutdown = getattr(iterator, "_shutdown_workers", None)  # what the iterator's own __del__ calls
    if callable(shutdown) and not getattr(iterator, "_persistent_workers", False):
        shutdown()


class ThreadPrefetcher(BackgroundGenerator):
    """``BackgroundGenerator`` that forwards every error and stops when asked.

    The base class puts exceptions on the queue but blocks forever on a full
    queue once the consumer is gone (a ``break`` in the training loop leaves the
    thread, and the loader's workers behind it, alive), and turns a
    ``BaseException`` in the producer into a silent end of data. Here the
    producer puts with a timeout and checks a halt flag, every exception raised
    by the source re-raises in the consumer (with its traceback), and
    ``close()`` ends the thread.
    """

    def __init__(self, iterable: Iterable, depth: int = 2) -> None:
        self._halt = threading.Event()  # not ``_stop``: threading.Thread has a method of that name
        super().__init__(iterable, max_prefetch=max(int(depth), 1))
        self.name = "regtrain-prefetch"

    def _put(self, item: Tuple[bool, Any]) -> bool:
        while not self._halt.is_set():
            try:
                self.queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def run(self) -> None:
        try:
            for item in self.generator:
                if not self._put((True, item)):
                    return
        except BaseException as err:  # noqa: BLE001 - forwarded to the consumer, which re-raises it
            self._put((False, err))
            return
        finally:
            stop_workers(self.generator)  # now, in this thread: not whenever the garbage collector finds the iterator
            self.generator = None  # release the loader's iterator from this thread
        self._put((False, _Done()))

    def next(self) -> Any:
        if not self.Continue:
            raise StopIteration
        while True:
            try:
                ok, item = self.queue.get(timeout=_POLL_S)
                break
            except queue.Empty:
                if not self.is_alive() and self.queue.empty():
                    self.Continue = False
                    raise RuntimeError(
                        "the prefetch thread ended without a result; see the log for its error"
                    ) from None
        if ok:
            return item
        self.Continue = False
        if isinstance(item, _Done):
            raise StopIteration
        raise item

    __next__ = next

    def close(self, timeout: float = 30.0) -> None:
        """Stop the producer and wait for it (it finishes the batch it is loading)."""
        self.Continue = False
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
            if self.is_alive():
                log.warning("prefetch thread still loading a batch after %.0f s; leaving it as a daemon", timeout)


def thread_prefetch(iterable: Iterable, depth: int = 2) -> Iterator[Any]:
    """Iterate ``iterable`` with ``depth`` items loaded ahead in a thread.

    A generator, so that leaving the loop early (``break``, an exception, the
    generator being dropped) runs ``close()`` and ends the thread.
    """
    producer = ThreadPrefetcher(iter(iterable), depth)
    try:
        yield from producer
    finally:
        producer.close()


class CudaPrefetcher:
    """Copies batch i+1 to the GPU on a side stream while batch i is computed.

    One stream per loader (made once, reused every epoch). The compute stream
    waits for the copy, and ``record_stream`` tells the caching allocator that
    the compute stream uses the memory, so it is not reused too early. Host
    tensors should be pinned (``pin_memory=True``) for the copy to be async.
    ``mean``/``std`` normalize the inputs on the GPU, on the side stream, where
    ``channels_last`` also turns 4-D inputs NHWC (``model.channels_last``); 8-bit images
    (``eight_bit``) are copied as they are, 4x fewer bytes, and become floats there.
    """

    def __init__(
        self,
        device: torch.device,
        mean: Optional[Sequence[float]] = None,
        std: Optional[Sequence[float]] = None,
        channels_last: bool = False,
        eight_bit: bool = False,
    ) -> None:
        self.device = device
        self.stream = torch.cuda.Stream(device)
        self.normalize = Normalize(mean, std, device, eight_bit=eight_bit)
        self.channels_last = channels_last

    def _load(self, it: Iterator[Any]) -> Any:
        batch = next(it, _Done)
        if batch is _Done:
            return _Done
        with torch.cuda.stream(self.stream):
            batch = to_device(batch, self.device)
            batch = self.normalize(batch)
            if self.channels_last:
                batch = inputs_channels_last(batch)
        return batch

    def __call__(self, iterable: Iterable) -> Iterator[Any]:
        it = iter(iterable)
        nxt = self._load(it)
        while nxt is not _Done:
            current = torch.cuda.current_stream(self.device)
            current.wait_stream(self.stream)
            batch = nxt
            _record_stream(batch, current)
            nxt = self._load(it)
            yield batch


def collates_new_tensors(loader: Any) -> bool:
    """Whether every batch of ``loader`` is made of new tensors: a DataLoader batching samples with
    ``default_collate`` (which stacks them into new memory, in a worker or not) or with a collate function
    marked ``collates_new_tensors = True``. Anything else (``batch_size=None``, a user's collate) may hand
    over tensors a dataset keeps, which normalizing in place would change."""
    collate = getattr(loader, "collate_fn", None)
    return (
        isinstance(loader, DataLoader)
        and loader.batch_size is not None
        and (collate is default_collate or getattr(collate, "collates_new_tensors", False) is True)
    )


def _record_stream(batch: Any, stream: "torch.cuda.Stream") -> None:
    for tensor in tensors_in(batch):
        if tensor.is_cuda:
            tensor.record_stream(stream)


def resolve_mode(mode: str, device: Optional[torch.device]) -> str:
    """``auto``: ``cuda`` on a GPU, ``thread`` otherwise."""
    if mode == "auto":
        return "cuda" if device is not None and device.type == "cuda" else "thread"
    if mode == "cuda":
        need_cuda("data.prefetch=cuda", device or torch.device("cpu"), "use data.prefetch=thread or auto")
    return mode


class PrefetchLoader:
    """A loader that prefetches; every other attribute is the wrapped loader's."""

    def __init__(
        self,
        loader: Any,
        mode: str = "thread",
        depth: int = 2,
        device: Optional[torch.device] = None,
        mean: Optional[Sequence[float]] = None,
        std: Optional[Sequence[float]] = None,
        channels_last: bool = False,
        eight_bit: bool = False,
    ) -> None:
        self.loader = loader
        self.mode = mode
        self.depth = depth
        self.mean, self.std = mean, std  # what inputs were normalized with (pictures of them undo it)
        # Built once: a CUDA stream per loader, not per epoch.
        self.cuda = CudaPrefetcher(device, mean, std, channels_last, eight_bit) if mode == "cuda" else None
        self.normalize = (
            Normalize(mean, std, in_place=collates_new_tensors(loader), eight_bit=eight_bit) if mode != "cuda" else None
        )
        self.channels_last = channels_last and mode != "cuda"  # the CUDA prefetcher converts on its copy stream

    def __len__(self) -> int:
        return len(self.loader)

    def __getattr__(self, name: str) -> Any:
        if name == "loader":  # not yet set (e.g. during unpickling): avoid recursing
            raise AttributeError(name)
        return getattr(self.loader, name)

    def __iter__(self) -> Iterator[Any]:
        source: Iterable = self.loader
        if self.normalize is not None and (self.normalize.mean is not None or self.normalize.eight_bit):
            source = map(self.normalize, source)
        if self.channels_last:  # in the prefetch thread with mode=thread
            source = map(inputs_channels_last, source)
        if self.mode == "thread":
            return thread_prefetch(source, self.depth)
        if self.mode == "cuda":
            return self.cuda(source)
        return iter(source)
