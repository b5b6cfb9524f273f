"""The index shuffle: a permutation of every length, told position by position, the same as its definition
computed one position at a time, even across positions, refusing positions outside, holding nothing per sample."""

from __future__ import annotations

import numpy as np
import pytest

from tests.fixtures.loop_orders import loop_shuffle
from utils.data.index_shuffle import IndexShuffle


@pytest.mark.parametrize("length", [0, 1, 2, 3, 4, 5, 15, 16, 17, 255, 256, 257, 1000, 4099])
def test_every_length_is_permuted_as_its_definition_says(length):
    for seed, epoch, stream in [(0, 0, 0), (7, 3, 0), (7, 3, 2), (-1, 5, 0)]:
        order = IndexShuffle(length, seed, epoch, stream).at(np.arange(length))
        assert sorted(order.tolist()) == list(range(length))
        assert order.tolist() == loop_shuffle(length, seed, epoch, stream)


def test_a_million_positions_are_a_permutation_in_any_chunks_and_any_order():
    shuffle = IndexShuffle(1_000_003, seed=1, epoch=2)
    whole = shuffle.at(np.arange(1_000_003))
    assert np.array_equal(np.sort(whole), np.arange(1_000_003)) and whole.dtype == np.int32
    picked = np.array([1_000_002, 5, 999_999, 5, 0])
    assert shuffle.at(picked).tolist() == whole[picked].tolist()
    assert np.array_equal(
        np.concatenate([shuffle.at(np.arange(a, min(a + 4096, 1_000_003))) for a in range(0, 1_000_003, 4096)]), whole
    )
    assert not np.array_equal(whole, IndexShuffle(1_000_003, seed=1, epoch=3).at(np.arange(1_000_003)))


def test_each_index_lands_at_each_position_about_equally_often():
    length, epochs = 10, 4000
    counts = np.zeros((length, length))
    for epoch in range(epochs):
        counts[np.arange(length), IndexShuffle(length, 0, epoch).at(np.arange(length))] += 1
    expected = epochs / length
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < 130  # 81 degrees of freedom: about 81 for an even shuffle; 4 rounds instead of 8 give about 170


def test_positions_outside_are_refused_and_huge_lengths_hold_nothing():
    with pytest.raises(IndexError, match=r"range\(5\)"):
        IndexShuffle(5, 0, 0).at(np.array([5]))
    with pytest.raises(ValueError, match="at least 0 places"):
        IndexShuffle(-1, 0, 0)
    huge = IndexShuffle(3 << 31, 0, 0)  # 6 billion places: nothing is drawn, indices need 64 bits
    picked = huge.at(np.array([0, (3 << 31) - 1]))
    assert picked.dtype == np.int64 and all(0 <= i < 3 << 31 for i in picked.tolist())
