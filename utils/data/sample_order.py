"""Which samples each batch of a training epoch holds, on every rank, computed on any one rank.

A training sampler deals its epoch's order to the ranks (``dealing(epoch)``, see ``samplers.py``):
rank 0 names the samples of every step alone, with no collective and nothing read from the device.
Batch ``b`` of the epoch, over the ranks, is rank 0's ``b``-th batch, then rank 1's, ...: the rank
order in which DDP's processes hold the global batch. An order tells the index at any position
(``utils/data/index_shuffle.py``): a rank's indices and a step's batches are computed when asked for, as numpy
arrays, and nothing of the epoch's size is held.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List

import numpy as np


@dataclass(frozen=True)
class Dealing:
    """An epoch's ``order`` (anything with ``len`` and ``at(positions)``: ``samplers.epoch_order``), laid out over
    ``total`` places by repeating it from its start (how ``DistributedSampler`` pads; ``total`` may also cut it
    short), and dealt to ``world_size`` ranks ``width`` indices at a time, rank 0 first (``DistributedSampler``
    deals one at a time, the global batch sampler a rank's slice of each global batch). ``total`` is a multiple
    of ``world_size * width``. Only the positions asked for are computed."""

    order: Any
    total: int
    world_size: int
    width: int

    def __post_init__(self) -> None:
        if self.total % (self.world_size * self.width):
            raise ValueError(f"{self.total} places do not deal into rounds of {self.world_size} x {self.width}")
        if self.total and not len(self.order):
            raise ValueError(f"an empty order cannot fill {self.total} places")

    @property
    def per_rank(self) -> int:
        """How many indices each rank gets."""
        return self.total // self.world_size

    def positions(self, ranks: np.ndarray, start: int, stop: int) -> np.ndarray:
        """The places of each of ``ranks``' indices ``start`` to ``stop - 1`` (one row per rank)."""
        turn = np.arange(start, stop, dtype=np.int64)
        within = turn // self.width * (self.world_size * self.width) + turn % self.width
        return ranks.astype(np.int64)[:, None] * self.width + within[None, :]

    def indices(self, places: np.ndarray) -> np.ndarray:
        """The indices at ``places`` of the order laid out (repeated from its start)."""
        return self.order.at(places % len(self.order)) if len(places) else np.zeros(0, dtype=np.int64)

    def rank_span(self, rank: int, start: int, stop: int) -> np.ndarray:
        """Rank ``rank``'s indices ``start`` to ``stop - 1``, in its order."""
        return self.indices(self.positions(np.array([rank]), start, stop)[0])

    def rank(self, rank: int) -> np.ndarray:
        """Rank ``rank``'s indices, all of them, in its order."""
        return self.rank_span(rank, 0, self.per_rank)

    def batches(self, batch_size: int) -> "EpochBatches":
        """Every rank's order cut into batches of ``batch_size``, batch by batch, in rank order."""
        return EpochBatches(self, batch_size)


@dataclass(frozen=True)
class EpochBatches:
    """The batches of an epoch over all ranks, each the ``batch_size`` next indices of rank 0, then of rank 1, ...
    (the last of each rank may be shorter); computed only for the batches asked for."""

    dealing: Dealing
    batch_size: int

    def __len__(self) -> int:
        return -(-self.dealing.per_rank // self.batch_size)

    def span(self, first: int, end: int) -> np.ndarray:
        """The indices of batches ``first`` to ``end - 1``, in order (one step's batches: a few)."""
        dealing, size = self.dealing, self.batch_size
        ranks = np.arange(dealing.world_size)
        places = [
            dealing.positions(ranks, b * size, min((b + 1) * size, dealing.per_rank)).reshape(-1)
            for b in range(first, min(end, len(self)))
        ]
        return dealing.indices(np.concatenate(places) if places else np.zeros(0, dtype=np.int64))

    def tolist(self) -> List[List[int]]:
        """Each batch as a list (for tests and small data)."""
        return [self.span(b, b + 1).tolist() for b in range(len(self))]


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
