"""A seeded permutation of ``range(length)`` told position by position: the index at any position costs the same
at ten samples and at a billion, and nothing of size ``length`` is ever held.

A balanced Feistel network on the smallest even number of bits that covers ``length`` is a permutation of
that power of two; positions it maps at or past ``length`` are mapped again until they land inside
("cycle walking": the walk from a position inside always comes back inside, as the network is a
permutation, and the domain is under four times ``length``, so it takes under four steps on average). The
round function is splitmix64's finalizer over the half and a round key; the keys come from ``(seed, epoch,
stream)`` by splitmix64 too: pure integer arithmetic, so the order is the same on every machine and with every
numpy version. ``tf.random.experimental.index_shuffle`` and Grain's index shuffle draw an epoch the same way.
"""

from __future__ import annotations

import numpy as np

ORDER = "index shuffle 1"  # what a checkpoint records of how its epochs were drawn: another draw is another name
ROUNDS = 8  # 4 make a pseudorandom permutation from random round functions; 8 also spread a domain of a few bits evenly
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _splitmix(state: int) -> int:
    """splitmix64's output for ``state`` (one step of its sequence), on Python ints."""
    z = (state + _GOLDEN) & _MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer over a uint64 array (products wrap modulo 2**64, as the finalizer means them to)."""
    z = values ^ (values >> np.uint64(30))
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    return z ^ (z >> np.uint64(31))


class IndexShuffle:
    """The permutation of ``range(length)`` that ``(seed, epoch, stream)`` names: ``at(positions)`` gives the index
    at each position (a bijection of ``range(length)``), in int32 where every index fits, else int64."""

    def __init__(self, length: int, seed: int, epoch: int, stream: int = 0) -> None:
        if length < 0:
            raise ValueError(f"a permutation has at least 0 places, not {length}")
        self.length = int(length)
        self.half = max(1, ((max(self.length, 2) - 1).bit_length() + 1) // 2)  # 2 * half bits cover length
        state = _splitmix(_splitmix(_splitmix(seed & _MASK64) ^ (epoch & _MASK64)) ^ (stream & _MASK64))
        keys = []
        for _ in range(ROUNDS):
            state = _splitmix(state)
            keys.append(state)
        self.keys = np.array(keys, dtype=np.uint64)
        self.dtype = np.int32 if self.length <= 1 << 31 else np.int64

    def __len__(self) -> int:
        return self.length

    def _network(self, values: np.ndarray) -> np.ndarray:
        """The Feistel network over ``values`` (uint64, each below ``4 ** half``): a permutation of that range."""
        shift, mask = np.uint64(self.half), np.uint64((1 << self.half) - 1)
        left, right = values >> shift, values & mask
        for key in self.keys:
            left, right = right, left ^ (_mix(right ^ key) & mask)
        return (left << shift) | right

    def at(self, positions: np.ndarray) -> np.ndarray:
        """The indices at ``positions`` (integers in ``range(length)``), in their shape."""
        positions = np.asarray(positions)
        if positions.size and (positions.min() < 0 or positions.max() >= self.length):
            raise IndexError(f"positions must lie in range({self.length})")
        out = self._network(positions.astype(np.uint64).reshape(-1))
        outside = np.flatnonzero(out >= self.length)
        while outside.size:  # cycle walking: map again what fell outside, until all are inside
            again = self._network(out[outside])
            out[outside] = again
            outside = outside[again >= self.length]
        return out.astype(self.dtype).reshape(positions.shape)
