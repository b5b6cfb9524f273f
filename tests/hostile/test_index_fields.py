"""A packed split's ``index.json`` met by every hostile field value (``fields.py``), read as a local pack and as
an S3 pack's cache reads it; arrays changed after packing; crafted arrays behind a consistent index."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List

import numpy as np
import pytest

import main
from tests.hostile.fields import Format, check_format, register
from tests.shards.packs import craft, set_text
from utils.data.shards.cache import ShardCache
from utils.data.shards.reader import load_index, open_split
from utils.data.shards.store import LocalStore
from utils.errors import DataError

ROOT = Path(__file__).resolve().parents[2]


_PACKED: List[Path] = []  # digits packed once per session (--mode pack), copied for each use


def make_pack(folder: Path) -> Path:
    """A pack of digits at ``folder`` (a copy of one packed through main.py); its test split's ``index.json``."""
    if not _PACKED:
        base = tempfile.mkdtemp(prefix="hostile-index-")
        atexit.register(shutil.rmtree, base, True)
        packed = Path(base) / "p"
        assert main.main(["--mode", "pack", "--output", str(packed), "data.name=digits", "--shard-size", "100KB"]) == 0
        _PACKED.append(packed)
    shutil.copytree(_PACKED[0], folder)
    return folder / "test" / "index.json"


def read_both_ways(index: Path, own: Path) -> None:
    """As a local pack reads it, and as an S3 pack's cache does (the arrays fetched into ``own`` by the names
    the index gives: the path the S3 reader takes, with the folder as its store)."""
    root = str(index.parent.parent)
    open_split(root, "test")
    store = LocalStore(root)
    load_index(store, "test", ShardCache(own / "cache", 1 << 30, store.download))


INDEX = register(Format("shard index", make_pack, read_both_ways))


@pytest.mark.slow  # a thousand variants, each read twice: about 4 s
def test_every_index_field_hostile_is_one_line_or_a_correct_read_and_nothing_outside(tmp_path):
    assert check_format(INDEX, tmp_path) > 500


@pytest.mark.parametrize("value", ["elsewhere", "../../..", "0" * 20 + "/../../x"])
def test_an_s3_array_checksum_that_is_a_path_names_no_cache_file(tmp_path, value):
    """An S3 pack whose arrays' sha256 is a path: the cache made its lock and .part file there."""
    index = make_pack(tmp_path / "p")
    header = json.loads(index.read_text())
    header["arrays"]["samples"]["sha256"] = str(tmp_path / value) if value == "elsewhere" else value
    index.write_text(json.dumps(header))
    store = LocalStore(str(tmp_path / "p"))
    with pytest.raises(DataError, match=r"has arrays\.samples\.sha256 = .*, not a sha256 \(64 lowercase hex"):
        load_index(store, "test", ShardCache(tmp_path / "cache", 1 << 30, store.download))
    assert list((tmp_path / "cache").iterdir()) == [] and not (tmp_path / "elsewhere").exists()


def shift_labels(folder: Path) -> None:
    """``samples.npy`` rewritten after packing with every label moved to the next class (index.json as it was)."""
    samples = np.load(folder / "samples.npy")
    samples["label"] = (samples["label"] + 1) % 10
    np.save(folder / "samples.npy", samples, allow_pickle=False)


def test_labels_shifted_after_packing_are_one_line_also_after_a_checked_start(tmp_path):
    folder = make_pack(tmp_path / "p").parent
    open_split(str(tmp_path / "p"), "test")  # checked whole, stamped
    open_split(str(tmp_path / "p"), "test")  # the stamp trusted
    shift_labels(folder)
    with pytest.raises(DataError, match=r"index array '.*samples\.npy' does not match its sha256 in index\.json"):
        open_split(str(tmp_path / "p"), "test")


CRAFTED = [  # arrays whose index.json checksums were made to match (a crafted pack), and the line that names them
    (
        lambda a, h: (h.__setitem__("classes", None), a["samples"]["label"].__setitem__(4, -7)),
        "at sample 4 (label -7 of ? classes)",
    ),
    (lambda a, h: a["samples"]["label"].__setitem__(4, 1000), "at sample 4 (label 1000 of 10 classes)"),
    (lambda a, h: a["samples"]["key"].__setitem__(9, 10**9), "at sample 0 (its keys are not one line per sample)"),
    (lambda a, h: set_text(a, "keys", "key", 3, "a\x00b"), "at sample 3 (key 'a\\x00b' is not a relative path"),
    (lambda a, h: set_text(a, "keys", "key", 3, "."), "at sample 3 (key '.' is not a relative path"),
    (lambda a, h: set_text(a, "keys", "key", 3, ".."), "at sample 3 (key '..' is not a relative path"),
]


def test_crafted_arrays_behind_a_consistent_index_are_one_line(tmp_path):
    folder = make_pack(tmp_path / "p").parent
    for change, named in CRAFTED:
        good = {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.endswith(".tar")}
        craft(folder, change)
        with pytest.raises(DataError) as err:
            open_split(str(tmp_path / "p"), "test")
        assert named in str(err.value), str(err.value)
        for name, data in good.items():
            (folder / name).write_bytes(data)


@pytest.mark.slow  # two runs of main.py
def test_main_says_one_line_for_a_crafted_field_and_for_shifted_labels(tmp_path):
    make_pack(tmp_path / "field")
    craft(tmp_path / "field" / "train", lambda a, h: h["shards"][1].__setitem__("bytes", 2**70))
    make_pack(tmp_path / "labels")
    shift_labels(tmp_path / "labels" / "val")
    make_pack(tmp_path / "unnamed")  # no class names, and a label beyond the network's 10 outputs
    craft(tmp_path / "unnamed" / "train", lambda a, h: (h.update(classes=None), a["samples"]["label"].put(4, 1000)))
    cases = (
        ("field", "has shards[1].bytes = 1180591620717411303424, not a size in bytes"),
        ("labels", "labels/val/samples.npy' does not match its sha256 in index.json"),
        ("unnamed", "the data has 1001 classes but the network outputs 10 score(s) per sample"),
    )
    for pack, named in cases:
        args = [f"data.root={tmp_path / pack}", "data.name=shards", "train.iterations=1", "threads=1"]
        args.append(f"experiment.output_root={tmp_path / 'out'}")
        run = subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
        (line,) = [line for line in run.stderr.splitlines() if "error:" in line]
        assert line.startswith("error:") and named in line, line


@pytest.mark.slow  # packs digits once (main.py, in process) when no other test of this file has
@pytest.mark.parametrize("name", ["index.json", "samples.npy"])
def test_a_fifo_in_a_handed_pack_is_one_line_not_a_read_that_never_ends(tmp_path, name):
    index = make_pack(tmp_path / "p")
    (index.parent / name).unlink()
    os.mkfifo(index.parent / name)
    with pytest.raises(DataError, match="not a regular file"):
        open_split(str(tmp_path / "p"), "test")
