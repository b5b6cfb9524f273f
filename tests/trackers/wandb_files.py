"""Reads W&B's offline run files (``run-<id>.wandb``) with W&B's own record definitions: a LevelDB-style log of
32 KiB blocks (a 7-byte file header, then records of checksum, length, type and data), each record one
``wandb_internal_pb2.Record``. The history of a run folder's offline runs, as the tests compare it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, List

BLOCK, HEADER = 32768, 7
FULL, LAST = 1, 4


def records(path: Path) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    assert data[:4] == b":W&B", f"{path} is no W&B run file"
    pos, pieces = HEADER, b""
    while pos + HEADER <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER:  # a block's tail too short for a record header is padding
            pos += left
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        pieces += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(pieces)
            pieces = b""
            yield record


def run_files(root: Path) -> List[Path]:
    """The offline runs' files under ``root``, oldest first."""
    return sorted(Path(root).rglob("offline-run-*/run-*.wandb"))


def run_ids(root: Path) -> List[str]:
    return [record.run.run_id for path in run_files(root) for record in records(path) if record.HasField("run")]


def history(root: Path) -> List[Dict[str, Any]]:
    """Every history row of the offline runs under ``root``, in order, as ``{key: value}`` with ``_step``."""
    rows = []
    for path in run_files(root):
        for record in records(path):
            if record.HasField("history"):
                rows.append(
                    {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
                )
    return rows
