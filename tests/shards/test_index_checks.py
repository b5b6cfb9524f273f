"""A packed split's index checked whole when it is loaded: a crafted or damaged index is one line naming the sample."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from tests.shards.packs import craft, load_split, pack, set_text
from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.data.shards import checked
from utils.errors import DataError


def set_field(array: str, field: str, at: int, value) -> object:
    return lambda a, h: a[array][field].__setitem__(at, value)


CRAFTED = [  # (what is changed in the test split's index, what the one line names)
    (set_field("members", "offset", 3, 2**63), "at sample 3 (a member spans bytes 9223372036854775808 .."),
    (set_field("members", "size", 3, 10**12), "-byte shard"),
    (set_field("samples", "shard", 5, 99), "at sample 5 (shard 99 of"),
    (set_field("samples", "count", 5, 0), "at sample 5 (0 member(s) where a classification sample has 1)"),
    (set_field("samples", "member", 6, 0), "at sample 6 (its members are not the rows after the previous sample's)"),
    (set_field("samples", "label", 7, 57), "at sample 7 (label 57 of 10 classes)"),
    (set_field("samples", "label", 7, -1), "at sample 7 (label -1 of 10 classes)"),
    (set_field("members", "ext", 8, 9), "at sample 8 (a member's extension 9 of 1)"),
    (
        lambda a, h: h["shards"][0].__setitem__("name", "../../train/shard-000000.tar"),
        'has shards[0].name = "../../train/shard-000000.tar", not a file beside it',
    ),
    (
        lambda a, h: h["arrays"]["keys"].__setitem__("name", "../keys.npy"),
        "has arrays.keys.name = \"../keys.npy\", not 'keys.npy'",
    ),
    (
        lambda a, h: h["extensions"].__setitem__(0, "../npy"),
        'has extensions = ["../npy"], not a list of plain file extensions',
    ),
    (lambda a, h: a.__setitem__("keys", a["keys"][:-1]), "at sample 0 (its keys are not one line per sample)"),
    # predict names a saliency map after its sample's key: a key that leaves the folder is refused on load
    (lambda a, h: set_text(a, "keys", "key", 2, "../../x.png"), "at sample 2 (key '../../x.png' is not a relative"),
    (lambda a, h: set_text(a, "keys", "key", 2, "/tmp/abs.png"), "at sample 2 (key '/tmp/abs.png' is not a relative"),
    (lambda a, h: set_text(a, "keys", "key", 2, "a/../../b"), "at sample 2 (key 'a/../../b' is not a relative"),
    (lambda a, h: set_text(a, "keys", "key", 2, ""), "at sample 2 (key '' is not"),
]


def test_a_crafted_or_damaged_index_is_one_line_naming_the_sample_before_any_read(tmp_path, capsys):
    pack(capsys, tmp_path / "p", "data.name=digits", "--shard-size", "100KB")
    folder = tmp_path / "p" / "test"
    good = {path.name: path.read_bytes() for path in folder.glob("*.*") if not path.name.endswith(".tar")}
    for change, named in CRAFTED:
        craft(folder, change)
        with pytest.raises(DataError, match="shard index '.*' ") as err:
            build_dataset(DataConfig(name="shards", root=str(tmp_path / "p")), "test")
        assert named in str(err.value) and str(err.value).endswith("pack the data again (--mode pack)"), str(err.value)
        for name, data in good.items():
            (folder / name).write_bytes(data)


def test_a_fresh_pack_is_stamped_checked_so_its_first_start_checks_nothing_per_sample(tmp_path, capsys):
    """--mode pack checks each split whole as it finishes it; a start then trusts the stamp, until an array
    changes (its change time moves, whatever its modification time says)."""
    pack(capsys, tmp_path / "p", "data.name=digits", "--shard-size", "100KB")
    folder = tmp_path / "p" / "val"
    files = {name: folder / f"{name}.npy" for name in ("samples", "members", "keys", "stems")}
    text = (folder / "index.json").read_bytes()
    assert checked.proven(checked.facts(text, files)) is not None
    # the stamp keeps the keys' sha256 (the data's fingerprint): a start does not hash them again
    keys = hashlib.sha256(np.load(files["keys"]).tobytes()).hexdigest()
    assert (
        checked.proven(checked.facts(text, files))
        == {"keys_sha256": keys, "label_count": None}  # digits names its classes
        == {"keys_sha256": load_split(folder).keys_sha256, "label_count": None}
    )
    before = os.stat(files["samples"])
    files["samples"].write_bytes(files["samples"].read_bytes())  # the same bytes, written again
    os.utime(files["samples"], ns=(before.st_atime_ns, before.st_mtime_ns))
    assert checked.proven(checked.facts(text, files)) is None
    load_split(folder)  # checked whole again (the same bytes: no error), stamped again
    assert checked.proven(checked.facts(text, files)) is not None
