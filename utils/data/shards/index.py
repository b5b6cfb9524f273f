"""The index of one packed split (``<root>/<split>/index.json``): what each shard and sample holds.

``{"format": "regtrain-shards", "version": 1, "split", "task", "dataset", "classes",
"shards": [{"name", "samples", "sha256", "bytes"}], "samples": [{"key", "shard",
"members": {member name: [offset, size, sha256[:16]]}, "image": member name, "label" | "mask"}]}``; a video's
entry names its ``frames`` (member names in frame order) instead of an ``image``.
The offsets are those of the members' data inside the tar, so a sample is read by byte
range without scanning the shard, and checked by its members' own checksums. Plain JSON: loading an index runs no code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from utils.data.input_shape import TASKS  # the tasks a split is packed for: eval.metric's names
from utils.errors import DataError
from utils.names_from_files import plain_name, relative_name

FORMAT = "regtrain-shards"
VERSION = 1
INDEX = "index.json"


@dataclass(frozen=True)
class Shard:
    """One tar file of a split: its name beside the index, sample count, checksum and size."""

    name: str
    samples: int
    sha256: str
    bytes: int


@dataclass(frozen=True)
class Index:
    """A split's index as read (see the module doc); ``samples`` are the JSON dicts themselves."""

    split: str
    task: str
    dataset: str
    classes: Optional[List[Any]]
    shards: List[Shard]
    samples: List[Dict[str, Any]]

    def to_json(self) -> str:
        shards = [vars(shard) for shard in self.shards]
        body = {"format": FORMAT, "version": VERSION, "split": self.split, "task": self.task}
        body.update(dataset=self.dataset, classes=self.classes, shards=shards, samples=self.samples)
        return json.dumps(body, separators=(",", ":"))


def parse_index(text: bytes, where: str) -> Index:
    """The index in ``text`` (read from ``where``); a DataError for another format or version, or a broken file."""
    try:
        body = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"shard index '{where}' is not valid JSON ({err}); pack the data again (--mode pack)") from err
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise DataError(f"'{where}' is not a shard index of this framework; pack the data with --mode pack")
    if body.get("version") != VERSION:
        raise DataError(
            f"shard index '{where}' has format version {body.get('version')!r}, this framework reads version {VERSION}; "
            "pack the data again with --mode pack"
        )
    try:
        shards = [Shard(s["name"], int(s["samples"]), s["sha256"], int(s["bytes"])) for s in body["shards"]]
        index = Index(body["split"], body["task"], body["dataset"], body["classes"], shards, body["samples"])
    except (KeyError, TypeError, ValueError) as err:
        raise DataError(f"shard index '{where}' lacks {err}; pack the data again (--mode pack)") from err
    if index.task not in TASKS or sum(s.samples for s in shards) != len(index.samples):
        raise DataError(f"shard index '{where}' is inconsistent (task or sample counts); pack the data again")
    for shard in shards:
        if not plain_name(shard.name):
            raise DataError(
                f"shard index '{where}' names the shard {shard.name!r}, not a file beside it; pack the data again"
            )
    for at, sample in enumerate(index.samples):
        problem = _sample_problem(index, sample)
        if problem:
            raise DataError(f"shard index '{where}' is inconsistent at sample {at} ({problem}); pack the data again")
    return index


# the members each task's entry names: a name, or a list of them (a video's frames)
NAMED = {"classification": ("image",), "sod": ("image", "mask"), "video": ("frames",)}


def _sample_problem(index: Index, sample: Any) -> str:
    """What is wrong with one sample's entry (its shard, members, byte spans, named members, label), or ''."""
    if not isinstance(sample, dict) or "key" not in sample:
        return "not an entry with a key"
    if not relative_name(sample["key"]):  # predict names its masks by the keys: a key stays below its folder
        return f"key {sample['key']!r} is not a relative path below the split (absolute, '..' or empty)"
    shard = sample.get("shard")
    if not isinstance(shard, int) or not 0 <= shard < len(index.shards):
        return f"shard {shard!r} of {len(index.shards)}"
    members = sample.get("members")
    if not isinstance(members, dict) or not members:
        return "no members"
    for name, span in members.items():
        if not (
            plain_name(name) and isinstance(span, list) and len(span) == 3 and all(isinstance(v, int) for v in span[:2])
        ):
            return f"member {name!r}: {span!r}"
        if span[0] < 0 or span[1] < 0 or span[0] + span[1] > index.shards[shard].bytes:
            return f"member {name!r} spans bytes {span[0]} .. {span[0] + span[1]} of a {index.shards[shard].bytes}-byte shard"
    for field in NAMED[index.task]:
        named = sample.get(field)
        names = named if field == "frames" and isinstance(named, list) else [named]
        if not names or any(name not in members for name in names):
            return f"its {field} {named!r} is not among its members"
    if index.task == "sod":
        # the saliency maps of eval.save_predictions are named by the stems
        return "" if plain_name(sample.get("stem")) else f"stem {sample.get('stem')!r} is not a plain file name"
    label, classes = sample.get("label"), index.classes
    if (
        not isinstance(label, int)
        or isinstance(label, bool)
        or label < 0
        or (classes is not None and label >= len(classes))
    ):
        return f"label {label!r} of {len(classes) if classes is not None else '?'} classes"
    return ""
