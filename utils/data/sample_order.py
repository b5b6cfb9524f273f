"""Which samples each batch of a training epoch holds over all ranks, computed on one rank.

A training sampler that tells any rank's order of an epoch (``order_of(epoch, rank)``, see
``samplers.py``) lets rank 0 name the samples of every step alone: no collective, nothing read
from the device. Batch ``b`` of the epoch, over the ranks, is rank 0's ``b``-th batch, then rank
1's, ...: the rank order in which DDP's processes hold the global batch.
"""

from __future__ import annotations

from typing import Any, List


def tells_order(sampler: Any) -> bool:
    """Whether ``sampler`` can give another rank's order of an epoch (``order_of``)."""
    return callable(getattr(sampler, "order_of", None))


def epoch_batches_of_all_ranks(sampler: Any, epoch: int, world_size: int, batch_size: int) -> List[List[int]]:
    """The indices of every batch of ``epoch`` over ``world_size`` ranks of ``batch_size`` samples each, in
    rank order; the last batch may be shorter (``data.drop_last=false``), and the loop may stop before it
    (a dropped last batch is never asked for)."""
    orders = [list(sampler.order_of(epoch, rank)) for rank in range(world_size)]
    count = -(-len(orders[0]) // batch_size)  # every rank's sampler has the same length
    return [[i for order in orders for i in order[b * batch_size : (b + 1) * batch_size]] for b in range(count)]
