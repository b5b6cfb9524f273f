"""Writing one split as tar shards (WebDataset's layout: members ``<n>.<m>.<ext>`` per sample) and its index.

The split is cut into shards by a plan made from the members' sizes alone (``plan_shards``), so each shard is
then written by any process, on any node, in any order, to the same bytes: ``--mode pack --workers K`` under
any number of launched processes gives the same shards, index and checksums. Each shard's writer gives its
members' rows of the index's ``members`` array (spans and checksums, in writing order), which the process that
writes the index puts in place (``pack_split.py``), so no writer holds the index of the whole split.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import numpy as np

from utils.data.shards.index import ARRAYS, INDEX, MEMBER, Header, Shard
from utils.files.checksum import file_digest
from utils.files.owned import check_file, make_dirs, open_file, write_text

BLOCK = tarfile.BLOCKSIZE
ROW = np.dtype([(name, MEMBER[name]) for name in ("offset", "size", "digest")])  # a member's row as its writer knows it


def tar_bytes(sizes: np.ndarray) -> np.ndarray:
    """The bytes a member of each size takes in a tar: its header block and its data padded to whole blocks
    (names as the writer gives them need no extended header)."""
    return BLOCK + (sizes + BLOCK - 1) // BLOCK * BLOCK


def plan_shards(sample_bytes: np.ndarray, shard_size: int) -> List[Tuple[int, int]]:
    """``[start, end)`` ranges of the samples in writing order, one per shard: a shard takes samples until its
    tar holds ``shard_size`` bytes or more (the sample that reaches it included), as a writer that checks its
    size before each sample would."""
    ends = np.cumsum(sample_bytes, dtype=np.int64)
    ranges, start = [], 0
    while start < len(sample_bytes):
        base = int(ends[start - 1]) if start else 0
        end = int(np.searchsorted(ends, base + shard_size, side="left")) + 1
        ranges.append((start, min(end, len(sample_bytes))))
        start = ranges[-1][1]
    return ranges


@dataclass(frozen=True)
class ShardJob:
    """One shard to write: its number, the samples it holds (their places in the index, in writing order) and
    the written number of its first sample (members are named after it)."""

    number: int
    samples: np.ndarray
    first_written: int


def shard_name(number: int) -> str:
    return f"shard-{number:06d}.tar"


def write_shard(folder: Path, job: ShardJob, members_of: Callable[[int], List[Tuple[str, bytes]]], rows: Any) -> Shard:
    """Writes ``job``'s shard into ``folder``: each sample's members (``members_of(i)``: ``(ext, bytes)`` in
    order), their spans and checksums into ``rows`` (``ROW``s, one per member in writing order)."""
    path = folder / shard_name(job.number)
    row = 0
    with open_file(folder, path, "wb") as out, tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for written, at in enumerate(job.samples.tolist(), start=job.first_written):
            for m, (ext, data) in enumerate(members_of(at)):
                info = tarfile.TarInfo(f"{written:09d}.{m}.{ext}")
                info.size, info.mtime, info.mode = len(data), 0, 0o644  # no time or user: the same data, the same bytes
                tar.addfile(info, io.BytesIO(data))
                offset = tar.offset - (len(data) + BLOCK - 1) // BLOCK * BLOCK
                rows[row] = (offset, len(data), _digest(data))
                row += 1
    return Shard(path.name, len(job.samples), file_digest(path), path.stat().st_size)


def _digest(data: bytes) -> int:
    """The first 8 bytes of the member's SHA-256, as the index's ``digest`` holds them (``reader.py`` compares)."""
    return int(np.frombuffer(hashlib.sha256(data).digest()[:8], "<u8")[0])


def create_arrays(folder: Path, sizes: Dict[str, int]) -> Dict[str, np.ndarray]:
    """The split's index arrays as new ``.npy`` files of ``sizes[name]`` rows, mapped for writing."""
    make_dirs(folder.parent, folder)  # the split's folder in the pack's output: no link on the way
    # open_memmap creates by name: a link at a name is removed first (never written through)
    return {
        name: np.lib.format.open_memmap(
            check_file(folder, folder / f"{name}.npy"), mode="w+", dtype=ARRAYS[name], shape=(sizes[name],)
        )
        for name in ARRAYS
    }


def finish(folder: Path, arrays: Dict[str, np.ndarray], facts: Dict[str, Any], shards: List[Shard]) -> Header:
    """Flushes the arrays, then writes ``index.json`` (last: a split folder with an index is complete)."""
    files = {}
    for name, array in arrays.items():
        array.flush()
        path = folder / f"{name}.npy"
        files[name] = Shard(path.name, 0, file_digest(path), path.stat().st_size)
    header = Header(
        facts["split"], facts["task"], facts["dataset"], facts["classes"], facts["count"], facts["extensions"],
        shards, files,
    )  # fmt: skip
    write_text(folder, folder / INDEX, header.to_json(), "run --mode pack again")
    return header
