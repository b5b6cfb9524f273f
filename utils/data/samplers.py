"""Samplers: a padding-free slice sampler for exact distributed evaluation, resumable training samplers.

A training epoch's order is ``epoch_permutation``: a function of the seed and the epoch alone, either
a shuffle of the whole split or, for a dataset that gives a :class:`WindowOrder` (packed shards with
``data.args.shuffle_window``), shards in a seeded order and samples shuffled within each window of
consecutive shards. Either way the global batches, the resume and the world-size independence are
the same; the window only changes which samples are near each other in the epoch.

Orders are numpy arrays (int32 up to 2**31 samples), computed without a Python loop over samples: an
epoch of 10 million samples starts in well under a second, and a rank iterates its part a chunk at a
time, each index as cheap as from a list.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Tuple

import numpy as np
import torch
from torch.utils.data import DistributedSampler, Sampler

from utils.data.sample_order import Dealing

CHUNK = 4096  # indices made Python ints at a time as an epoch is iterated: the per-index cost is flat in the data size


@dataclass(frozen=True, eq=False)
class WindowOrder:
    """``shard_of[i]``: the shard of sample ``i`` (a shard's samples, in index order, are its group);
    ``window``: how many consecutive shards (in the epoch's shard order) have their samples shuffled together."""

    shard_of: np.ndarray
    window: int

    def __post_init__(self) -> None:
        shard_of = np.asarray(self.shard_of) if len(self.shard_of) else np.zeros(0, dtype=np.int64)
        if shard_of.ndim != 1 or (shard_of.size and (shard_of.dtype.kind not in "iu" or shard_of.min() < 0)):
            raise ValueError(
                f"shard_of must be a 1-D array of shard numbers >= 0, not {shard_of.dtype} {shard_of.shape}"
            )
        if self.window < 1:
            raise ValueError(f"a window holds at least one shard, not {self.window}")
        if shard_of.size and shard_of.max() < 1 << 31:
            shard_of = shard_of.astype(np.int32, copy=False)  # 4 bytes a sample
        object.__setattr__(self, "shard_of", shard_of)

    @functools.cached_property
    def grouped(self) -> Tuple[np.ndarray, np.ndarray]:
        """``(members, sizes)``: the sample indices shard by shard (shards by number, those without samples left
        out, each one's samples in index order) and the size of each; sorted once, read every epoch."""
        counts = np.bincount(self.shard_of)
        present = counts > 0
        group = (np.cumsum(present) - 1)[self.shard_of]
        narrow = group.astype(np.uint16 if present.sum() <= 1 << 16 else np.int64)  # 16 bits: numpy's radix sort
        members = np.argsort(narrow, kind="stable")
        return members.astype(np.int32) if len(members) <= 1 << 31 else members, counts[present]

    @property
    def sizes(self) -> np.ndarray:
        """The samples of each shard that has any, by shard number."""
        return self.grouped[1]


def epoch_permutation(length: int, seed: int, epoch: int, window: Optional[WindowOrder] = None) -> torch.Tensor:
    """The order of epoch ``epoch``: ``torch.randperm`` from ``seed + epoch`` (``DistributedSampler``'s own), or
    with ``window``: the shards permuted from the same generator, then each window's samples permuted."""
    generator = torch.Generator().manual_seed(seed + epoch)
    if window is None:  # int32 where it holds every index: the same draws, the same order, half the memory
        return torch.randperm(length, generator=generator, dtype=torch.int32 if length <= 1 << 31 else torch.int64)
    members, sizes = window.grouped
    if len(members) != length:
        raise ValueError(f"the window order covers {len(members)} samples, the dataset holds {length}")
    shards = torch.randperm(len(sizes), generator=generator).numpy()
    # the samples shard by shard in the epoch's shard order: each shard's run of members, moved to its place
    taken = sizes[shards]
    at = np.arange(length)
    at += np.repeat((np.cumsum(sizes) - sizes)[shards] - (np.cumsum(taken) - taken), taken)
    sequence = members[at]
    # then each window's samples permuted, window after window from the one generator: a loop over windows
    order, start = at, 0  # ``at`` is not needed any more: its memory takes the order
    for count in np.add.reduceat(taken, np.arange(0, len(taken), window.window)) if len(taken) else []:
        end = start + int(count)
        order[start:end] = sequence[start:end][torch.randperm(end - start, generator=generator).numpy()]
        start = end
    return torch.from_numpy(order)


def laid_out(order: torch.Tensor, total: int, length: int) -> np.ndarray:
    """The first ``total`` indices of ``order``, repeated from its start as often as that takes (how
    ``DistributedSampler`` pads), as int32 where a dataset of ``length`` allows (half the bytes to copy and hold)."""
    source = order.numpy()
    if total <= len(source) and source.dtype == (np.int32 if length <= 1 << 31 else np.int64):
        return source[:total]  # nothing to pad or narrow: the order itself, not a second copy of it
    out = np.empty(total, dtype=np.int32 if length <= 1 << 31 else np.int64)
    done = min(len(source), total)
    out[:done] = source[:done]
    if total and not done:
        raise ValueError(f"an empty order cannot fill {total} places")
    while done < total:  # each copy doubles what is there: a few copies, whatever the padding
        step = min(done, total - done)
        out[done : done + step] = out[:step]
        done += step
    return out


class DealtOrder:
    """A training sampler whose epoch is a :class:`~utils.data.sample_order.Dealing` (``dealing(epoch)``): any
    rank's order of any epoch (``order_of``), and this rank's epoch iterated ``CHUNK`` indices at a time
    after the first ``skip`` (needs ``epoch``, ``rank`` and ``skip``)."""

    epoch: int
    rank: int
    skip: int

    def dealing(self, epoch: int) -> Dealing:
        raise NotImplementedError

    def order_of(self, epoch: int, rank: int) -> np.ndarray:
        """Rank ``rank``'s indices of epoch ``epoch``, all of them (no skip), this sampler left as it is."""
        return self.dealing(epoch).rank(rank)

    def __iter__(self) -> Iterator[int]:
        return _from(self.order_of(self.epoch, self.rank), self.skip)


def _from(order: np.ndarray, skip: int) -> Iterator[int]:
    """The indices of ``order`` after its first ``skip``, made Python ints ``CHUNK`` at a time (each then read
    by a list iterator: a generator per index would cost three times as much)."""
    return itertools.chain.from_iterable(order[at : at + CHUNK].tolist() for at in range(skip, len(order), CHUNK))


class SliceSampler(Sampler[int]):
    """Rank ``r`` of ``w`` takes indices r, r+w, r+2w, ...: disjoint slices, no repeats.

    ``DistributedSampler`` pads the dataset by repeating samples so that every rank
    gets the same count; summing metrics over its slices counts those samples twice.
    Here slice sizes may differ by one, and the union is exactly the dataset.
    """

    def __init__(self, length: int, rank: int = 0, world_size: int = 1) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world size {world_size}")
        self.length = length
        self.rank = rank
        self.world_size = world_size

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, self.length, self.world_size))

    def __len__(self) -> int:
        return len(range(self.rank, self.length, self.world_size))


class ResumableSampler(DealtOrder, DistributedSampler):
    """``DistributedSampler`` that can start an epoch after its first ``skip`` indices.

    The order of an epoch depends only on (seed, epoch), so skipping the indices
    of the batches a checkpoint had consumed continues that epoch exactly; the
    skipped samples are never loaded. ``set_epoch`` clears the skip, and also
    reseeds ``generator`` (the DataLoader's, which seeds its workers) from
    (seed, epoch, rank): the global torch generator is then not drawn from when
    an epoch's iterator starts, so its stream is the same with or without a resume.
    """

    def __init__(
        self,
        dataset: Any,
        num_replicas: int,
        rank: int,
        seed: int,
        generator: Optional[torch.Generator] = None,
        window: Optional[WindowOrder] = None,
    ) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.skip = 0
        self.generator = generator
        self.window = window

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self.skip = 0
        if self.generator is not None:
            self.generator.manual_seed((self.seed * 1_000_003 + epoch) * 1_009 + self.rank)

    def skip_first(self, count: int) -> None:
        """Leave out the first ``count`` indices of the current epoch (call after ``set_epoch``)."""
        self.skip = max(int(count), 0)

    def dealing(self, epoch: int) -> Dealing:
        """``DistributedSampler``'s order of ``epoch`` (over ``epoch_permutation``): padded by repeating its start,
        dealt one index at a time."""
        order = epoch_permutation(len(self.dataset), self.seed, epoch, self.window)
        return Dealing(laid_out(order, self.total_size, len(self.dataset)), self.num_replicas, 1)

    def __len__(self) -> int:
        return max(self.num_samples - self.skip, 0)


class GlobalBatchSampler(DealtOrder, Sampler[int]):
    """The training order of ``data.global_batch_size``: the same global batches at every world size.

    An epoch's order is one permutation of the dataset drawn from (seed, epoch),
    cut into global batches of ``global_batch`` samples (the last, incomplete one
    is left out, so every step sees a full global batch); rank ``r`` of ``w``
    takes the r-th slice of ``global_batch / w`` samples of each. Which samples a
    global batch holds therefore does not depend on the world size, and a run that
    consumed ``b`` global batches continues at any world size by skipping
    ``b * global_batch / w`` samples of its slice (``skip_first``).
    """

    def __init__(
        self,
        length: int,
        global_batch: int,
        rank: int,
        world_size: int,
        seed: int,
        generator: Optional[torch.Generator] = None,
        window: Optional[WindowOrder] = None,
    ) -> None:
        if global_batch % world_size:
            raise ValueError(f"global batch {global_batch} is not divisible by world size {world_size}")
        self.length, self.global_batch, self.rank, self.world_size, self.seed = (
            length,
            global_batch,
            rank,
            world_size,
            seed,
        )
        self.local_batch = global_batch // world_size
        self.generator = generator
        self.window = window
        self.epoch = 0
        self.skip = 0

    @property
    def batches(self) -> int:
        """Global batches per epoch."""
        return self.length // self.global_batch

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch's permutation, clear the skip, reseed the loader's generator (as ``ResumableSampler``)."""
        self.epoch, self.skip = epoch, 0
        if self.generator is not None:
            self.generator.manual_seed((self.seed * 1_000_003 + epoch) * 1_009 + self.rank)

    def skip_first(self, count: int) -> None:
        """Leave out the first ``count`` indices of this rank's part of the current epoch (call after ``set_epoch``)."""
        self.skip = max(int(count), 0)

    def dealing(self, epoch: int) -> Dealing:
        """The permutation of ``epoch`` without its incomplete last global batch, dealt ``global_batch / world_size``
        at a time: what any rank can compute for any other."""
        order = epoch_permutation(self.length, self.seed, epoch, self.window)
        return Dealing(
            laid_out(order, self.batches * self.global_batch, self.length), self.world_size, self.local_batch
        )

    def __len__(self) -> int:
        return max(self.batches * self.local_batch - self.skip, 0)
