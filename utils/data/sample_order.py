"""Which samples each batch of a training epoch holds, on every rank, computed on any one rank.

A training sampler deals its epoch's order to the ranks (``dealing(epoch)``, see ``samplers.py``):
rank 0 names the samples of every step alone, with no collective and nothing read from the device.
Batch ``b`` of the epoch, over the ranks, is rank 0's ``b``-th batch, then rank 1's, ...: the rank
order in which DDP's processes hold the global batch. Orders and batches are index arrays (a few bytes
per sample; numpy, no Python loop over samples).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

import numpy as np


@dataclass(frozen=True)
class EpochBatches:
    """The batches of an epoch over all ranks, one after another in ``indices``: batch ``b`` is
    ``indices[b * stride : (b + 1) * stride]`` (``stride``: one batch of every rank); the last may be shorter."""

    indices: np.ndarray
    stride: int

    def __len__(self) -> int:
        return -(-len(self.indices) // self.stride)

    def span(self, first: int, end: int) -> np.ndarray:
        """The indices of batches ``first`` to ``end - 1``, in order."""
        return self.indices[first * self.stride : end * self.stride]

    def tolist(self) -> List[List[int]]:
        """Each batch as a list (for tests and small data)."""
        return [self.span(b, b + 1).tolist() for b in range(len(self))]


@dataclass(frozen=True)
class Dealing:
    """An epoch's ``order`` over all ranks, dealt to ``world_size`` ranks ``width`` indices at a time, rank 0
    first (``DistributedSampler`` deals one at a time, the global batch sampler a rank's slice of each global
    batch); ``len(order)`` is a multiple of ``world_size * width``."""

    order: np.ndarray
    world_size: int
    width: int

    def _rounds(self) -> np.ndarray:
        return self.order.reshape(-1, self.world_size, self.width)

    def rank(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s indices, in its order."""
        return self._rounds()[:, rank].reshape(-1)

    def batches(self, batch_size: int) -> EpochBatches:
        """Every rank's order cut into batches of ``batch_size``, batch by batch, in rank order: one copy at most."""
        rounds, ranks = self._rounds(), self.world_size
        if batch_size == self.width:  # a batch is one round: the global batch sampler's batches are its order
            return EpochBatches(self.order, ranks * batch_size)
        if batch_size % self.width == 0:  # a batch is whole rounds of the deal (both samplers' case)
            per = batch_size // self.width
            full = len(rounds) // per * per
            head = rounds[:full].reshape(-1, per, ranks, self.width).transpose(0, 2, 1, 3)
            tail = rounds[full:].transpose(1, 0, 2)
        else:
            orders = rounds.transpose(1, 0, 2).reshape(ranks, -1)
            full = orders.shape[1] // batch_size * batch_size
            head = orders[:, :full].reshape(ranks, -1, batch_size).transpose(1, 0, 2)
            tail = orders[:, full:]
        indices = np.empty(len(self.order), dtype=self.order.dtype)
        indices[: head.size].reshape(head.shape)[...] = head
        indices[head.size :].reshape(tail.shape)[...] = tail  # the ranks' last, shorter batches
        return EpochBatches(indices, ranks * batch_size)


def tells_order(sampler: Any) -> bool:
    """Whether ``sampler`` deals its epochs (``dealing``): then any rank can tell every rank's order."""
    return callable(getattr(sampler, "dealing", None))


def epoch_batches_of_all_ranks(sampler: Any, epoch: int, world_size: int, batch_size: int) -> EpochBatches:
    """The indices of every batch of ``epoch`` over ``world_size`` ranks of ``batch_size`` samples each, in
    rank order; the last batch may be shorter (``data.drop_last=false``), and the loop may stop before it
    (a dropped last batch is never asked for)."""
    dealing = sampler.dealing(epoch)
    if dealing.world_size != world_size:
        raise ValueError(f"the sampler deals to {dealing.world_size} ranks, not {world_size}")
    return dealing.batches(batch_size)
