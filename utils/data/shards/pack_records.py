"""What a pack in progress keeps in its output, so that the same command, killed part-way, completes it.

``.pack/manifest.json`` records what the pack was started with (the data section and the shard size) and, per
split, the fingerprint of its plan (the samples' members, sizes, labels and keys, and the shards' order). Each
shard, once written, leaves ``.pack/<split>/shard-NNNNNN.tar.rows.npy`` (its members' rows of the index's
``members`` array: spans and checksums) and then ``shard-NNNNNN.tar.json`` (its samples, sha256 and size). A
rerun skips a shard whose record is there and whose file still has the recorded sha256; the process that writes
a split's index reads every process's records, so processes on other nodes need share nothing but the output
(a folder every node sees, or an S3 prefix). ``.pack`` goes once the last index is written.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np

from utils.config.typed_merge import flatten
from utils.data.shards.index import Shard
from utils.data.shards.store import LocalStore, Store
from utils.data.shards.writer import ROW
from utils.errors import DataError
from utils.files.checksum import file_digest
from utils.files.owned import make_dirs, remove, remove_tree, write_bytes

FOLDER = ".pack"
MANIFEST = f"{FOLDER}/manifest.json"
FORMAT = "regtrain-pack-in-progress"
AGAIN = "run the same --mode pack command again"


def _put(store: Store, name: str, data: bytes, scratch: Path) -> None:
    """``data`` as the file (object) ``name``: written in place in a folder, uploaded from ``scratch`` to S3."""
    if isinstance(store, LocalStore):
        make_dirs(store.root, store.path(name).parent)
        write_bytes(store.root, store.path(name), data, AGAIN)
        return
    local = scratch / f"record-{os.getpid()}"  # one per writer process: they share the scratch folder
    write_bytes(scratch, local, data, AGAIN)
    store.upload(local, name)
    remove(scratch, local)


def _get(store: Store, name: str) -> Optional[bytes]:
    return store.read(name) if store.has(name) else None


class Records:
    """The records of one split of the pack into ``store`` (S3: through files in ``scratch``)."""

    def __init__(self, store: Store, split: str, scratch: Path) -> None:
        self.store, self.split, self.scratch = store, split, scratch

    def name(self, shard: str, suffix: str) -> str:
        return f"{FOLDER}/{self.split}/{shard}{suffix}"

    def save(self, shard: Shard, rows: np.ndarray) -> None:
        """The written ``shard``'s record (its rows first: a record with facts always has its rows)."""
        buffer = io.BytesIO()
        np.save(buffer, rows, allow_pickle=False)
        _put(self.store, self.name(shard.name, ".rows.npy"), buffer.getvalue(), self.scratch)
        facts = {"samples": shard.samples, "sha256": shard.sha256, "bytes": shard.bytes}
        _put(self.store, self.name(shard.name, ".json"), json.dumps(facts).encode(), self.scratch)

    def written(self, shard: str) -> bool:
        """Whether the shard named ``shard`` left its record (it may since have changed: ``load``)."""
        return self.store.has(self.name(shard, ".json"))

    def load(self, shard: str, members: int, checked: bool = False) -> Optional[Tuple[Shard, np.ndarray]]:
        """The shard's record, when it is whole (``members`` rows) and the shard has the recorded size and sha256
        (``checked``: its writer wrote or checked it in this pack: not read again)."""
        facts = _get(self.store, self.name(shard, ".json"))
        rows = _get(self.store, self.name(shard, ".rows.npy")) if facts is not None else None
        if facts is None or rows is None:
            return None
        found = json.loads(facts)
        array = np.load(io.BytesIO(rows), allow_pickle=False)
        if array.dtype != ROW or len(array) != members:
            return None
        record = Shard(shard, found["samples"], found["sha256"], found["bytes"])
        return (record, array) if checked or self._intact(record) else None

    def _intact(self, shard: Shard) -> bool:
        """Whether the shard in the output has its recorded size and sha256 (S3: read whole once, to check)."""
        name = f"{self.split}/{shard.name}"
        if isinstance(self.store, LocalStore):
            path = self.store.path(name)
            return path.is_file() and path.stat().st_size == shard.bytes and file_digest(path) == shard.sha256
        if not self.store.has(name):
            return False
        local = self.scratch / f"check-{os.getpid()}"
        self.store.download(name, local)
        try:
            return local.stat().st_size == shard.bytes and file_digest(local) == shard.sha256
        finally:
            remove(self.scratch, local)

    def clear(self, shards: int, name_of: Any) -> None:
        """The split's records gone (its index is written): ``shards`` of them, named ``name_of(number)``."""
        if isinstance(self.store, LocalStore):
            remove_tree(self.store.root, self.store.path(f"{FOLDER}/{self.split}"))
            return
        names = [self.name(name_of(n), suffix) for n in range(shards) for suffix in (".json", ".rows.npy")]
        self.store.remove(names)  # type: ignore[attr-defined]


def settings(data: Any, shard_size: int) -> Dict[str, Any]:
    """What the pack's bytes depend on besides the data's files: the dataset, its root and arguments, the test
    split and the shard size (never the processes, workers or host: any count packs the same bytes)."""
    body = {"name": data.name, "root": data.root, "args": data.args, "test_split": data.test_split}
    return json.loads(json.dumps({"data": body, "shard_size": shard_size}, default=str))


def begin(store: Store, started: Dict[str, Any]) -> Dict[str, Any]:
    """The manifest of the pack into ``store``: a new one for an empty output (written with the first split's plan,
    before its first shard: a pack that fails before leaves nothing), the recorded one for a pack started with the
    same settings; a DataError for any other output (not empty, or a pack of other data or settings)."""
    found = _get(store, MANIFEST)
    if found is None:
        if not store.is_empty():  # stale shards beside a new index, a run's folder, the data itself: never written into
            raise DataError(f"--output '{store.url}' is not empty; pack into a new or empty folder (or S3 prefix)")
        return {"format": FORMAT, **started, "splits": {}}
    manifest = json.loads(found)
    for key, now in flatten(started).items():
        then = flatten({k: manifest.get(k) for k in started}).get(key)
        if then != now:
            raise DataError(
                f"--output '{store.url}' holds a pack started with {key}={json.dumps(then)}, not "
                f"{json.dumps(now)}; complete it with the settings it was started with, or pack into a new or "
                "empty folder"
            )
    return manifest


def agree(store: Store, manifest: Dict[str, Any], split: str, fingerprint: str, scratch: Path) -> None:
    """The split's plan recorded in the manifest (its first pack), or a DataError when the data changed since."""
    known = manifest["splits"].get(split)
    if known is None:
        manifest["splits"][split] = fingerprint
        _put(store, MANIFEST, json.dumps(manifest, indent=1).encode(), scratch)
    elif known != fingerprint:
        raise DataError(
            f"the data of split '{split}' changed since the pack into '{store.url}' started (its files, their sizes, "
            "labels or names); pack into a new or empty folder"
        )


def end(store: Store) -> None:
    """The pack is complete: its manifest gone (the last file removed; the records went split by split)."""
    if isinstance(store, LocalStore):
        remove_tree(store.root, store.path(FOLDER))
    else:
        store.remove([MANIFEST])  # type: ignore[attr-defined]
