"""Sample keys in a string table: the same keys, the same fingerprint (checkpoints store it and a resume
compares it)."""

from __future__ import annotations

import os
import pickle
from typing import List

import numpy as np
import pytest

from tests.fixtures.loop_orders import loop_fingerprint
from utils.data.identity import data_identity, relative_key, sample_keys
from utils.data.string_table import StringTable

ODD = ["cat/a.png", "", "two\nlines", "caf\u00e9/\u00e9.jpg", "bad\udcff.jpg", "x" * 300, "last"]


class Listed:
    """A dataset that names its samples by a list (``sample_keys``), as datasets without a table do."""

    classes = ["a", "b"]

    def __init__(self, keys: List[str]) -> None:
        self.keys = keys

    def __len__(self) -> int:
        return len(self.keys)

    def sample_keys(self) -> List[str]:
        return list(self.keys)


class Tabled(Listed):
    def key_table(self) -> StringTable:
        return StringTable.from_strings(self.keys)


def test_a_table_gives_back_its_strings_in_chunks_by_index_and_after_pickling():
    table = StringTable.from_strings(iter(ODD))  # a generator: consumed a chunk at a time
    assert len(table) == len(ODD) and list(table) == table.tolist() == ODD
    assert [table[i] for i in range(len(ODD))] == ODD and table[-1] == "last"
    assert [s for part in table.chunks(3) for s in part] == ODD
    plain = StringTable.from_strings(["a", "bb", "", "c"])
    assert [len(part) for part in plain.chunks(3)] == [3, 1] and list(plain) == ["a", "bb", "", "c"]
    assert list(pickle.loads(pickle.dumps(table))) == ODD and len(StringTable.from_strings([])) == 0
    with pytest.raises(IndexError, match="index 7 is outside a table of 7 strings"):
        table[7]
    assert table.buffer.dtype == np.uint8 and table.offsets.dtype == np.int64 and table.nbytes < 400 + 8 * 8


def test_the_fingerprint_of_a_table_is_the_fingerprint_of_its_keys_one_by_one():
    listed, tabled = data_identity(Listed(ODD)), data_identity(Tabled(ODD))
    assert (
        listed == tabled and listed["fingerprint"] == loop_fingerprint(ODD) == "0d4c58c3e6667750"
    )  # as before the table
    assert sample_keys(Tabled(ODD)).tolist() == sample_keys(Listed(ODD)) == ODD


@pytest.mark.parametrize("root", ["/data/train", "/data/train/", "data/train", ".", "/", "../up/train", "a/../train"])
def test_a_key_cut_from_the_root_is_what_relpath_gives(root):
    paths = [f"{root.rstrip('/')}/{rest}" for rest in ("cat/x.jpg", "cat/sub/y.png", "../val/cat/z.jpg", "c/./d")]
    paths += ["/elsewhere/q.jpg", "cat/x.jpg", f"{root.rstrip('/')}//cat/w.jpg", f"{root.rstrip('/')}/cat/"]
    for path in paths:
        assert relative_key(path, root) == os.path.relpath(path, root), (path, root)
