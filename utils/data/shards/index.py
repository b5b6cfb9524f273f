"""The index of one packed split: ``<split>/index.json`` and the four arrays it names. The one module that
knows the format (``--mode pack`` writes it through ``writer.py``; the readers load it with ``load`` of
``index_load.py``).

``index.json`` holds what is per split and per shard, nothing per sample::

    {"format": "regtrain-shards", "version": 2, "split", "task", "dataset", "classes", "samples": N,
     "extensions": ["png", ...], "shards": [{"name", "samples", "sha256", "bytes"}],
     "arrays": {"samples": {"name": "samples.npy", "sha256", "bytes"}, "members": ..., "keys": ..., "stems": ...}}

The arrays are ``.npy`` files (numpy's documented format, read with ``allow_pickle=False``: no code runs)
that every process maps read-only (``np.load(mmap_mode="r")``), so a node's ranks and loader workers share
one copy through the page cache and no process holds a Python object per sample (MosaicML's MDS, LitData and
FFCV keep their sample metadata the same way):

- ``samples`` (N rows of ``SAMPLE``): the sample's shard, its members (``count`` rows of ``members`` from row
  ``member``: the image, then the mask for SOD; a video's frames in order), its label (-1: none), and where
  its key and stem start in ``keys`` and ``stems``;
- ``members`` (one row per member, each sample's rows together, in sample order): the member's data span in
  its shard (the tar member's data, read by byte range), the first 8 bytes of its SHA-256 (checked at each
  read) and its extension (an index into ``extensions``);
- ``keys``, ``stems``: UTF-8 bytes, each key (stem) followed by ``\\n``: the data's fingerprint (the SHA-256 of
  its keys, ``utils/data/identity.py``) is the hash of ``keys`` as it is.

Loading checks the whole index at once with numpy (``index_load.py``), so a crafted or damaged index is
one error line naming the sample before any read, at a cost that stays a few numpy passes at 10M samples.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from utils.data.input_shape import TASKS  # the tasks a split is packed for: eval.metric's names
from utils.errors import DataError

FORMAT = "regtrain-shards"
VERSION = 2
INDEX = "index.json"
SAMPLE = np.dtype(
    [("shard", "<u4"), ("count", "<u4"), ("member", "<u8"), ("label", "<i8"), ("key", "<u8"), ("stem", "<u8")]
)
MEMBER = np.dtype([("offset", "<u8"), ("size", "<u8"), ("digest", "<u8"), ("ext", "<u2")])
ARRAYS = {"samples": SAMPLE, "members": MEMBER, "keys": np.dtype("u1"), "stems": np.dtype("u1")}
REPACK = "pack the data again (--mode pack)"


@dataclass(frozen=True)
class Shard:
    """One tar file of a split: its name beside the index, sample count, checksum and size."""

    name: str
    samples: int
    sha256: str
    bytes: int


@dataclass(frozen=True)
class Header:
    """``index.json``: the split's facts, its shards and the array files (``{array: Shard-like file facts}``)."""

    split: str
    task: str
    dataset: str
    classes: Optional[List[Any]]
    count: int  # samples
    extensions: List[str]
    shards: List[Shard]
    arrays: Dict[str, Shard]  # samples, members, keys, stems -> their file (``samples`` here: the row count)

    def to_json(self) -> str:
        body: Dict[str, Any] = {"format": FORMAT, "version": VERSION, "split": self.split, "task": self.task}
        body.update(dataset=self.dataset, classes=self.classes, samples=self.count, extensions=self.extensions)
        body.update(shards=[vars(shard) for shard in self.shards])
        body["arrays"] = {
            name: {"name": f.name, "sha256": f.sha256, "bytes": f.bytes} for name, f in self.arrays.items()
        }
        return json.dumps(body, separators=(",", ":"))


def parse_header(text: bytes, where: str) -> Header:
    """The header in ``text`` (read from ``where``); a DataError for another format or version, or a broken file."""
    try:
        body = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise DataError(f"shard index '{where}' is not valid JSON ({err}); {REPACK}") from err
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise DataError(f"'{where}' is not a shard index of this framework; pack the data with --mode pack")
    if body.get("version") != VERSION:
        older = " (a JSON entry per sample, before the compact index)" if body.get("version") == 1 else ""
        raise DataError(
            f"shard index '{where}' has format version {body.get('version')!r}{older}, this framework reads version "
            f"{VERSION}; {REPACK}"
        )
    try:
        shards = [Shard(str(s["name"]), int(s["samples"]), str(s["sha256"]), int(s["bytes"])) for s in body["shards"]]
        arrays = {
            name: Shard(str(f["name"]), 0, str(f["sha256"]), int(f["bytes"])) for name, f in body["arrays"].items()
        }
        header = Header(
            body["split"], body["task"], body["dataset"], body["classes"], int(body["samples"]), body["extensions"],
            shards, arrays,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise DataError(f"shard index '{where}' lacks {err}; {REPACK}") from err
    named = all(arrays.get(name, Shard("", 0, "", 0)).name == f"{name}.npy" for name in ARRAYS)  # files beside it
    if (
        header.task not in TASKS
        or sum(s.samples for s in shards) != header.count
        or set(arrays) != set(ARRAYS)
        or not named
    ):
        raise DataError(f"shard index '{where}' is inconsistent (task, sample counts or arrays); {REPACK}")
    return header


class Index:
    """A split's index as loaded: the header's facts and the mapped arrays (see the module doc)."""

    def __init__(self, header: Header, arrays: Dict[str, np.ndarray]) -> None:
        self.header = header
        self.split, self.task, self.dataset = header.split, header.task, header.dataset
        self.classes, self.shards, self.extensions = header.classes, header.shards, header.extensions
        self.samples, self.members = arrays["samples"], arrays["members"]
        self.keys, self.stems = arrays["keys"], arrays["stems"]

    def __len__(self) -> int:
        return len(self.samples)

    def key(self, at: int) -> str:
        return _text(self.keys, self.samples, at, "key")

    def stem(self, at: int) -> str:
        return _text(self.stems, self.samples, at, "stem")

    def label(self, at: int) -> int:
        return int(self.samples["label"][at])

    def spans(self, at: int) -> np.ndarray:
        """Sample ``at``'s member rows (``MEMBER``), in order: the image (then the mask), or a video's frames."""
        row = self.samples[at]
        return self.members[int(row["member"]) : int(row["member"]) + int(row["count"])]

    def ext(self, member: Any) -> str:
        return self.extensions[int(member["ext"])]


def _text(buffer: np.ndarray, samples: np.ndarray, at: int, field: str) -> str:
    start = int(samples[field][at])
    end = int(samples[field][at + 1]) - 1 if at + 1 < len(samples) else len(buffer) - 1
    return bytes(buffer[start:end]).decode("utf-8", "surrogateescape")
