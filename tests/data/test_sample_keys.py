"""Sample keys in a string table: the same keys, the same fingerprint (checkpoints store it and a resume
compares it), and folder datasets that hold their sample lists as arrays, not as Python objects."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any, List

import numpy as np
import pytest
from PIL import Image

from tests.fixtures.loop_orders import loop_fingerprint
from utils.data.datasets.image_folder import ImageFolder
from utils.data.datasets.image_mask_folder import ImageMaskFolder
from utils.data.datasets.video_frames_folder import VideoFramesFolder
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
    assert plain.take(np.array([3, 0, -2, 1, 1])) == ["c", "a", "", "bb", "bb"] and plain.take(np.array([])) == []
    assert table.take(np.array([2, 0, -1])) == ["two\nlines", "cat/a.png", "last"]  # a key holding "\n" too
    assert list(pickle.loads(pickle.dumps(table))) == ODD and len(StringTable.from_strings([])) == 0
    with pytest.raises(IndexError, match="index 7 is outside a table of 7 strings"):
        table[7]
    with pytest.raises(IndexError, match="an index of 0..4 is outside a table of 4 strings"):
        plain.take(np.array([0, 4]))
    assert table.buffer.dtype == np.uint8 and table.offsets.dtype == np.int64 and table.nbytes < 400 + 8 * 8


def test_a_table_over_mapped_starts_reads_as_the_same_table_without_copying_them():
    """A packed index's key column (N uint64 starts, mapped) and the buffer's end: the same strings, no N + 1 copy."""
    whole = StringTable.from_strings(["a", "bb", "", "c/d.png"])
    starts = whole.offsets[:-1].astype(np.uint64)
    table = StringTable(whole.buffer, starts, end=len(whole.buffer), plain=True, digest="known")
    assert table._starts is starts and list(table) == table.tolist() == ["a", "bb", "", "c/d.png"] == list(whole)
    assert [table[i] for i in (3, -1, 0)] == ["c/d.png", "c/d.png", "a"] and len(table) == 4
    assert table.take(np.array([3, 0, 2, -4])) == ["c/d.png", "a", "", "a"] and table.sha256() == "known"
    assert [len(part) for part in table.chunks(3)] == [3, 1] and np.array_equal(table.offsets, whole.offsets)


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


def image(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4)).save(path)


def per_sample_containers(dataset: Any) -> List[str]:
    """The attributes of ``dataset`` that hold a Python container with an entry per sample."""
    n = len(dataset)
    return [name for name, v in vars(dataset).items() if isinstance(v, (list, tuple, dict, set)) and len(v) >= n]


def test_image_folder_keys_are_relpaths_and_its_samples_are_arrays(tmp_path):
    root = tmp_path / "data"
    for name in ("cat/b.jpg", "cat/a.png", "cat/caf\u00e9.jpg", "dog/1.jpg", "dog/sub/2.jpg", "val/cat/v.jpg"):
        image(root / ("train" if not name.startswith("val") else "") / name)
    with open(os.fsencode(root / "train" / "cat") + b"/bad\xff.jpg", "wb") as fh:
        Image.new("RGB", (4, 4)).save(fh, format="PNG")
    os.symlink("../cat", root / "train" / "dog" / "link")  # another class's folder, read again under dog
    dataset = ImageFolder("train", str(root), classes=["cat", "dog", "../val/cat"])  # the last: outside the split
    paths = [dataset.path(i) for i in range(len(dataset))]
    keys = [os.path.relpath(p, dataset.root) for p in paths]
    assert dataset.sample_keys() == keys == sample_keys(dataset).tolist()
    assert keys[:4] == ["cat/a.png", "cat/b.jpg", "cat/bad\udcff.jpg", "cat/caf\u00e9.jpg"]
    assert keys[-1] == "../val/cat/v.jpg" and paths[-1] == f"{root}/train/../val/cat/v.jpg"
    assert [dataset.label(i) for i in range(len(dataset))] == [0] * 4 + [1] * 6 + [2]
    assert data_identity(dataset)["fingerprint"] == loop_fingerprint(keys)
    assert dataset.labels.dtype == np.int32 and not per_sample_containers(dataset)
    assert dataset[2][1] == 0 and isinstance(dataset[2][1], int)  # the undecodable name reads back


def test_image_mask_folder_and_video_frames_folder_keep_arrays_and_the_same_keys(tmp_path):
    for stem in ("b", "a", "c.d"):
        image(tmp_path / "train" / "Image" / f"{stem}.jpg")
        image(tmp_path / "train" / "Mask" / f"{stem}.png")
    pairs = ImageMaskFolder("train", str(tmp_path), size=None)
    assert pairs.sample_keys() == ["a.jpg", "b.jpg", "c.d.jpg"] and not per_sample_containers(pairs)
    assert pairs.source.files(2) == (
        "c.d",
        tmp_path / "train" / "Image" / "c.d.jpg",
        tmp_path / "train" / "Mask" / "c.d.png",
    )
    named = pairs.collate_fn.paths  # what a mixed-size batch error names, looked up by stem
    assert named.get("b") == str(tmp_path / "train" / "Image" / "b.jpg") and named.get("zz", "zz") == "zz"
    for video in ("Run/v1", "Run/v2", "Walk/w1"):
        for k in range(2):
            image(tmp_path / "frames" / "train" / video / f"img_{k}.jpg")
    videos = VideoFramesFolder("train", str(tmp_path / "frames"), clip_len=2)
    assert videos.sample_keys() == ["train/Run/v1", "train/Run/v2", "train/Walk/w1"] and not per_sample_containers(
        videos
    )
    assert videos.folder(2) == tmp_path / "frames" / "train" / "Walk" / "w1" and videos.labels.tolist() == [0, 0, 1]
    assert videos.frame_counts.tolist() == [2, 2, 2] and videos[2][1] == {"label": 1, "video": 2}
    evaluation = VideoFramesFolder("train", str(tmp_path / "frames"), clip_len=2, num_clips=2)
    evaluation.training = False
    assert sample_keys(evaluation).tolist()[:3] == ["train/Run/v1#0", "train/Run/v1#1", "train/Run/v2#0"]
