"""Samplers: a padding-free slice sampler for exact distributed evaluation, resumable training samplers.

A training epoch's order is ``epoch_order``: a function of the seed and the epoch alone, either an
:class:`~utils.data.index_shuffle.IndexShuffle` of the whole split or, for a dataset that gives a
:class:`WindowOrder` (packed shards with ``data.args.shuffle_window``), shards in a seeded order and samples
shuffled within each window of consecutive shards. Either way the global batches, the resume and the world-size
independence are the same; the window only changes which samples are near each other in the epoch.

Orders are told position by position, never drawn whole: an epoch of a hundred million samples starts in no
time and holds nothing per sample, and a rank iterates its part a chunk at a time (``CHUNK`` indices computed
at once, each then as cheap as from a list).
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Tuple, Union

import numpy as np
import torch
from torch.utils.data import DistributedSampler, Sampler

from utils.data.index_shuffle import IndexShuffle
from utils.data.sample_order import Dealing

CHUNK = 4096  # indices made Python ints at a time as an epoch is iterated: the per-index cost is flat in the data size
GROUP_BLOCK = 1 << 20  # samples grouped by shard at a time: a million, about 40 MB of temporaries


Grouping = Tuple[np.ndarray, np.ndarray]  # (members, sizes): see WindowOrder.grouped


@dataclass(frozen=True, eq=False)
class WindowOrder:
    """``shard_of[i]``: the shard of sample ``i`` (a shard's samples, in index order, are its group);
    ``window``: how many consecutive shards (in the epoch's shard order) have their samples shuffled together;
    ``kept``: where the grouping is kept between runs (given how to compute it, returns it: a pack maps it from the
    user's cache, ``utils/data/shards/grouping.py``); None: computed in memory."""

    shard_of: np.ndarray
    window: int
    kept: Optional[Callable[[Callable[[], Grouping]], Grouping]] = None

    def __post_init__(self) -> None:
        shard_of = np.asarray(self.shard_of) if len(self.shard_of) else np.zeros(0, dtype=np.int64)
        signed = shard_of.dtype.kind == "i"
        if shard_of.ndim != 1 or (
            shard_of.size and (shard_of.dtype.kind not in "iu" or (signed and shard_of.min() < 0))
        ):
            raise ValueError(
                f"shard_of must be a 1-D array of shard numbers >= 0, not {shard_of.dtype} {shard_of.shape}"
            )
        if self.window < 1:
            raise ValueError(f"a window holds at least one shard, not {self.window}")
        if shard_of.itemsize < 4 or (shard_of.itemsize > 4 and shard_of.size and shard_of.max() < 1 << 31):
            shard_of = shard_of.astype(np.int32)  # 4 bytes a sample (a pack's own column, uint32, stays mapped)
        object.__setattr__(self, "shard_of", shard_of)

    @functools.cached_property
    def grouped(self) -> Grouping:
        """``(members, sizes)``: the sample indices shard by shard (shards by number, those without samples left
        out, each one's samples in index order) and the size of each; computed once per run (or kept: ``kept``),
        read every epoch."""
        return self._group() if self.kept is None else self.kept(self._group)

    def _group(self) -> Grouping:
        """The grouping, computed.

        A counting sort, a block of samples at a time: each block's samples are ordered by shard (two stable radix
        passes of 16 bits) and written at their shards' next free places, so nothing but ``members`` grows with
        the split (``benchmarks/bench_sample_arrays.py`` compares it with one argsort of every sample's shard)."""
        shard_of = self.shard_of
        blocks = range(0, len(shard_of), GROUP_BLOCK)
        counts = np.zeros(int(shard_of.max()) + 1 if len(shard_of) else 0, dtype=np.int64)
        for start in blocks:  # by blocks: bincount copies its input as int64, 800 MB at 100 million samples
            counts += np.bincount(shard_of[start : start + GROUP_BLOCK], minlength=len(counts))
        free = np.cumsum(counts) - counts  # each shard's next free place in ``members``
        members = np.empty(len(shard_of), dtype=np.int32 if len(shard_of) <= 1 << 31 else np.int64)
        for start in blocks:
            block = shard_of[start : start + GROUP_BLOCK]
            order = _by_shard(block)
            shards = block[order]
            taken = np.bincount(shards, minlength=len(counts))
            members[free[shards] + np.arange(len(block)) - (np.cumsum(taken) - taken)[shards]] = order + start
            free += taken
        return members, counts[counts > 0]

    @property
    def sizes(self) -> np.ndarray:
        """The samples of each shard that has any, by shard number."""
        return self.grouped[1]


class ShardWindows:
    """The epoch order of a :class:`WindowOrder`: its shards in the order of an :class:`IndexShuffle` of the
    shards, and the samples of each ``window`` consecutive shards (in that order) in the order of their window's
    own shuffle. Told position by position like the plain order; what it holds is per shard, besides the
    window order's ``members`` (computed once per run)."""

    def __init__(self, window: WindowOrder, length: int, seed: int, epoch: int) -> None:
        members, sizes = window.grouped
        if len(members) != length:
            raise ValueError(f"the window order covers {len(members)} samples, the dataset holds {length}")
        self.members, self.seed, self.epoch, self.length = members, seed, epoch, length
        shards = IndexShuffle(len(sizes), seed, epoch).at(np.arange(len(sizes)))
        taken = sizes[shards]
        self.slot_start = np.cumsum(taken) - taken  # where each shard's samples begin in the epoch's shard order
        self.member_start = (np.cumsum(sizes) - sizes)[shards]  # and where they begin in ``members``
        self.window_start = self.slot_start[:: window.window]
        self.window_size = np.diff(np.append(self.window_start, length))

    def __len__(self) -> int:
        return self.length

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The indices at ``positions``: each window's positions through its shuffle, then shard and member."""
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        windows = np.searchsorted(self.window_start, positions, side="right") - 1
        sorted_at = np.argsort(windows, kind="stable")  # a rank's chunk meets one window or two: few groups
        grouped = windows[sorted_at]
        places = np.empty(len(positions), dtype=np.int64)
        for first, end in _runs(grouped):
            w = int(grouped[first])
            which = sorted_at[first:end]
            start = self.window_start[w]
            shuffle = IndexShuffle(int(self.window_size[w]), self.seed, self.epoch, stream=1 + w)
            places[which] = start + shuffle.at(positions[which] - start)
        slots = np.searchsorted(self.slot_start, places, side="right") - 1
        return self.members[self.member_start[slots] + places - self.slot_start[slots]]


def _runs(values: np.ndarray) -> List[Tuple[int, int]]:
    """``(first, end)`` of each run of equal values in sorted ``values``."""
    bounds = np.flatnonzero(np.diff(values)) + 1
    starts = np.concatenate(([0], bounds)) if len(values) else bounds
    return list(zip(starts.tolist(), np.append(bounds, len(values)).tolist()))


EpochOrder = Union[IndexShuffle, ShardWindows]


def _by_shard(block: np.ndarray) -> np.ndarray:
    """The stable order of ``block``'s shard numbers: least significant 16 bits first, then the next 16 (numpy sorts
    16-bit keys by radix; larger ones by a comparison sort, three times slower)."""
    order = np.argsort((block & 0xFFFF).astype(np.uint16), kind="stable")
    for shift in range(16, int(block.max()).bit_length() if len(block) else 0, 16):
        order = order[np.argsort(((block[order] >> shift) & 0xFFFF).astype(np.uint16), kind="stable")]
    return order


def epoch_order(length: int, seed: int, epoch: int, window: Optional[WindowOrder] = None) -> EpochOrder:
    """The order of epoch ``epoch``, a function of the seed and the epoch alone: an :class:`IndexShuffle` of the
    whole split, or with ``window`` its :class:`ShardWindows`. Nothing is drawn until a position is asked for."""
    return IndexShuffle(length, seed, epoch) if window is None else ShardWindows(window, length, seed, epoch)


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
        dealing, rank = self.dealing(self.epoch), self.rank
        # computed CHUNK at a time and made Python ints, each then read by a list iterator: a generator per index
        # would cost three times as much
        return itertools.chain.from_iterable(
            dealing.rank_span(rank, at, min(at + CHUNK, dealing.per_rank)).tolist()
            for at in range(self.skip, dealing.per_rank, CHUNK)
        )


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
    """``DistributedSampler``'s padding and rank slices over ``epoch_order``, able to start an epoch after its first
    ``skip`` indices.

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
        """The order of ``epoch`` dealt as ``DistributedSampler`` deals its own: padded by repeating its start, one
        index at a time."""
        order = epoch_order(len(self.dataset), self.seed, epoch, self.window)
        return Dealing(order, self.total_size, self.num_replicas, 1)

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
        order = epoch_order(self.length, self.seed, epoch, self.window)
        return Dealing(order, self.batches * self.global_batch, self.world_size, self.local_batch)

    def __len__(self) -> int:
        return max(self.batches * self.local_batch - self.skip, 0)
