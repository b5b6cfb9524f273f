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

Every field of ``index.json`` is checked by type and range before use (``HEADER_FIELDS``, ``SHARD_FIELDS``):
one error line names the field, its value and the fix, and no field becomes a path (shard names are the ones
pack gives, checksums 64 hex digits). The arrays are checked whole once, then trusted by a stamp at a cost flat
in the sample count (``index_load.py``, ``checked.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from utils.data.input_shape import TASKS  # the tasks a split is packed for: eval.metric's names
from utils.errors import DataError
from utils.files.names import plain_name

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


Rule = Tuple[Callable[[Any], bool], str]  # a field's test, and what a valid value is (the error line says it)
WHOLE_MAX = 2**63  # every count and size fits the arrays' 64-bit fields
SHARD_NAME = re.compile(r"shard-[0-9]{6,10}\.tar")  # the names pack gives its shards (``writer.shard_name``)
HEX64 = re.compile(r"[0-9a-f]{64}")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < WHOLE_MAX


def _printable(value: Any) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 255 and value.isprintable()


def _extension(value: Any) -> bool:
    # not held to printable: a file name that is not UTF-8 may end so (pack writes its bytes as \udcXX escapes)
    return isinstance(value, str) and 0 < len(value) <= 255 and plain_name(value) and "." not in value


def _class_names(value: Any) -> bool:
    named = (isinstance(c, (str, int)) and not isinstance(c, bool) for c in value) if isinstance(value, list) else ()
    return value is None or (isinstance(value, list) and all(named))


COUNT: Rule = (_whole, "a count (a whole number from 0)")
SIZE: Rule = (_whole, "a size in bytes (a whole number from 0 below 2**63)")
SHA256: Rule = (lambda v: isinstance(v, str) and HEX64.fullmatch(v) is not None, "a sha256 (64 lowercase hex digits)")
# every field of index.json: its test and what it must be; a nested table for each list or object of them
HEADER_FIELDS: Dict[str, Rule] = {
    "split": (lambda v: _printable(v) and plain_name(v), "a split's name"),
    "task": (lambda v: v in TASKS, f"one of {list(TASKS)}"),
    "dataset": (_printable, "a dataset's name"),
    "classes": (_class_names, "null or a list of class names"),
    "samples": COUNT,
    "extensions": (
        lambda v: isinstance(v, list) and len(v) <= 65536 and all(_extension(e) for e in v),
        "a list of plain file extensions (png, jpg, npy)",
    ),
    "shards": (lambda v: isinstance(v, list) and len(v) < 2**32, "a list of shards"),
    "arrays": (
        lambda v: isinstance(v, dict) and sorted(v) == sorted(ARRAYS),
        f"an object of the arrays {list(ARRAYS)}",
    ),
}
SHARD_FIELDS: Dict[str, Rule] = {
    "name": (
        lambda v: isinstance(v, str) and SHARD_NAME.fullmatch(v) is not None,
        "a file beside it (shard-NNNNNN.tar)",
    ),
    "samples": COUNT,
    "sha256": SHA256,
    "bytes": SIZE,
}


def array_fields(name: str) -> Dict[str, Rule]:
    """The fields of ``arrays.<name>``: the file beside the index, its checksum and size."""
    return {"name": (lambda v: v == f"{name}.npy", f"'{name}.npy'"), "sha256": SHA256, "bytes": SIZE}


def checked_fields(body: Any, fields: Dict[str, Rule], at: str, where: str) -> Dict[str, Any]:
    """``body`` (an object of ``where``, at ``at``: ``shards[3].``) when each of ``fields`` passes its test; a
    DataError naming the first field that does not, its value and what it must be."""
    if not isinstance(body, dict):
        raise DataError(f"shard index '{where}' has {at.rstrip('.')} = {_shown(body)}, not an object; {REPACK}")
    for field, (test, what) in fields.items():
        if field not in body:
            raise DataError(f"shard index '{where}' lacks the field {at}{field}; {REPACK}")
        if not test(body[field]):
            raise DataError(f"shard index '{where}' has {at}{field} = {_shown(body[field])}, not {what}; {REPACK}")
    return body


def _shown(value: Any) -> str:
    """``value`` as the error line quotes it: its JSON, cut short (a crafted field may be long)."""
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} characters)"


def parse_header(text: bytes, where: str) -> Header:
    """The header in ``text`` (read from ``where``), each field checked by type and range (``HEADER_FIELDS``); a
    DataError naming the field, for another format or version, or a broken file."""
    try:
        body = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise DataError(f"shard index '{where}' is not valid JSON ({err}); {REPACK}") from err
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise DataError(f"'{where}' is not a shard index of this framework; pack the data with --mode pack")
    if body.get("version") != VERSION:
        older = " (a JSON entry per sample, before the compact index)" if body.get("version") == 1 else ""
        raise DataError(
            f"shard index '{where}' has format version {_shown(body.get('version'))}{older}, this framework reads "
            f"version {VERSION}; {REPACK}"
        )
    checked_fields(body, HEADER_FIELDS, "", where)
    shards = [
        Shard(s["name"], s["samples"], s["sha256"], s["bytes"])
        for i, s in enumerate(body["shards"])
        if checked_fields(s, SHARD_FIELDS, f"shards[{i}].", where)
    ]
    arrays = {}
    for name in ARRAYS:
        file = checked_fields(body["arrays"][name], array_fields(name), f"arrays.{name}.", where)
        arrays[name] = Shard(file["name"], 0, file["sha256"], file["bytes"])
    header = Header(
        body["split"], body["task"], body["dataset"], body["classes"], body["samples"], body["extensions"],
        shards, arrays,
    )  # fmt: skip
    if sum(s.samples for s in shards) != header.count:
        raise DataError(
            f"shard index '{where}' has samples = {header.count}, but its shards hold {sum(s.samples for s in shards)}; "
            f"{REPACK}"
        )
    return header


class Index:
    """A split's index as loaded: the header's facts and the mapped arrays (see the module doc)."""

    def __init__(self, header: Header, arrays: Dict[str, np.ndarray]) -> None:
        self.header = header
        self.split, self.task, self.dataset = header.split, header.task, header.dataset
        self.classes, self.shards, self.extensions = header.classes, header.shards, header.extensions
        self.samples, self.members = arrays["samples"], arrays["members"]
        self.keys, self.stems = arrays["keys"], arrays["stems"]
        self.keys_sha256: Optional[str] = None  # the keys' lines' sha256 when loading learned it (index_load.py)
        self.label_count: Optional[int] = None  # the classes, or the largest label + 1 without names (index_load.py)
        self.digest: Optional[str] = None  # index.json's sha256 (index_load.py): what its checked arrays derive from

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
