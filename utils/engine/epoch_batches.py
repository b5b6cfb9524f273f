"""The batches of one training epoch: the sampler pointed at the epoch, a resume's consumed batches skipped."""

from __future__ import annotations

import logging
from typing import Any, Iterator

from utils.data.prefetch import stop_workers

log = logging.getLogger(__name__)


def epoch_batches(loader: Any, epoch: int, skip: int) -> Iterator[Any]:
    """The batches of epoch ``epoch`` after its first ``skip`` (those a resumed run had consumed): a
    resumable sampler skips them without loading them, any other loader reads and drops them."""
    sampler = getattr(loader, "sampler", None)
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    batches: Any = loader
    if skip and hasattr(sampler, "skip_first"):
        sampler.skip_first(skip * loader.batch_size)
    elif skip:
        log.warning("this loader cannot skip samples: reading and dropping %d batches", skip)
        batches = iter(loader)
        for _ in range(skip):
            next(batches)
    return iter(batches)


def close_batches(batches: Any) -> None:
    """Stop what feeds ``batches`` now: leaving an epoch early (step budget, preemption, an error) must stop a
    prefetch thread, and a loader's worker processes end now rather than at garbage collection."""
    close = getattr(batches, "close", None)
    if close is not None:
        close()
    else:
        stop_workers(batches)
