"""Packing one split with ``workers`` processes: the plan from the members' sizes, then each shard written by one
process (``writer.py``). Nothing is encoded: a file's bytes are copied, an in-memory tensor saved as ``.npy``.

The plan (a stat per file, in parallel) fixes which samples each shard holds, so the shards, the index and the
checksums are the same for any number of workers; the index's arrays are files the writers fill in place, so the
packing process holds a few numbers per sample (its plan), not the index. The training split's samples go into
the shards in a seeded shuffle (the index keeps the dataset's order): a folder's order is class by class, and a
shard-window order (``data.args.shuffle_window``) would otherwise see few classes in each window.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from utils.data.shards.index import Header, Shard
from utils.data.shards.sources import PackSource, contents, sizes
from utils.data.shards.writer import (
    ShardJob,
    create_arrays,
    finish,
    open_members,
    plan_shards,
    tar_bytes,
    write_shard,
)
from utils.data.string_table import StringTable
from utils.errors import DataError, OutputError
from utils.log import progress_bar

CHUNK = 4096  # samples per task of the plan


@dataclass
class SplitJob:
    """What the writer processes inherit when they fork: the samples, where their shards go, each sample's first
    member row, and where a finished shard is uploaded (S3: ``upload(local file)``, which then removes it)."""

    source: PackSource
    folder: Path
    first: Optional[np.ndarray] = None
    upload: Optional[Callable[[Path], None]] = None


_JOB: Optional[SplitJob] = None  # set before the processes fork; read in them


@contextlib.contextmanager
def written(folder: Path) -> Iterator[None]:
    """An OSError while writing into ``folder`` (a full disk, a folder pack may not write) as one error line."""
    try:
        yield
    except OutputError:  # an OSError too: already the line (a writer process's)
        raise
    except OSError as err:
        raise OutputError.writing(folder, err, "pack again into a new or empty --output") from err


def _map(function: Callable[[Any], Any], tasks: List[Any], workers: int) -> Iterator[Any]:
    """``function`` over ``tasks`` in order, in ``workers`` forked processes (in this one for 1)."""
    if workers <= 1 or len(tasks) <= 1:
        yield from map(function, tasks)
        return
    pool = multiprocessing.get_context("fork").Pool(min(workers, len(tasks)), initializer=_plain_signals)
    try:
        yield from pool.imap(function, tasks)
        pool.close()  # done: the workers exit on their own
    finally:
        pool.terminate()  # after close: reaps them; on an error: stops them
        pool.join()


def _plain_signals() -> None:
    """A writer process ends on SIGTERM and SIGINT as a plain process does: the parent's handlers (a training
    run's preemption handler, in a process that trained before) would keep it alive through the pool's stop."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which stops the pool


def _plan_chunk(bounds: Tuple[int, int]) -> Tuple[np.ndarray, np.ndarray, List[str], np.ndarray]:
    """Members per sample, member sizes, and member extensions (a table and codes) of samples ``bounds``."""
    assert _JOB is not None
    counts, member_sizes, table, codes = [], [], {}, []
    for at in range(*bounds):
        found = sizes(_JOB.source.members(at))
        counts.append(len(found))
        for ext, size in found:
            member_sizes.append(size)
            codes.append(table.setdefault(ext, len(table)))
    return np.array(counts, np.uint32), np.array(member_sizes, np.uint64), list(table), np.array(codes, np.uint16)


def _write(job: ShardJob) -> Shard:
    assert _JOB is not None and _JOB.first is not None
    with written(_JOB.folder):
        shard = write_shard(
            _JOB.folder, job, lambda at: contents(_JOB.source.members(at)), open_members(_JOB.folder), _JOB.first
        )
        if _JOB.upload is not None:
            _JOB.upload(_JOB.folder / shard.name)
    return shard


def _lines(table: StringTable, what: str) -> StringTable:
    """``table`` as the index keeps it, one line per string; a DataError naming a string that holds a line break."""
    if int(np.count_nonzero(table.buffer == 10)) != len(table):
        broken = next(text for text in table if "\n" in text)
        raise DataError(
            f"--mode pack: the {what} {broken!r} holds a line break, which the index cannot keep; rename it"
        )
    return table


def pack_split(
    job: SplitJob, shard_size: int, workers: int, shuffled: bool, show: bool
) -> Tuple[Header, Dict[str, Any]]:
    """Writes the split of ``job.source`` into ``job.folder``: its shards and its index; (the header, the facts)."""
    global _JOB
    source, folder = job.source, job.folder
    _JOB = job
    try:
        with written(folder):
            chunks = [(start, min(start + CHUNK, source.count)) for start in range(0, source.count, CHUNK)]
            counts, member_sizes, extensions, codes = _merge(list(_map(_plan_chunk, chunks, workers)))
            job.first = np.cumsum(counts, dtype=np.uint64) - counts
            per_sample = (
                np.add.reduceat(tar_bytes(member_sizes), job.first.astype(np.int64)) if source.count else counts
            )
            order = (
                torch.randperm(source.count, generator=torch.Generator().manual_seed(0)).numpy()
                if shuffled
                else np.arange(source.count)
            )
            ranges = plan_shards(per_sample[order], shard_size)
            keys, stems = _lines(source.keys(), "key"), _lines(source.stems(), "stem")
            arrays = create_arrays(
                folder,
                {
                    "samples": source.count,
                    "members": len(member_sizes),
                    "keys": len(keys.buffer),
                    "stems": len(stems.buffer),
                },
            )
            samples = arrays["samples"]
            samples["count"], samples["member"], samples["label"] = counts, job.first, source.labels()
            samples["key"] = keys.offsets[:-1]
            if len(stems):  # else 0: no stems
                samples["stem"] = stems.offsets[:-1]
            for number, (start, end) in enumerate(ranges):
                samples["shard"][order[start:end]] = number
            arrays["members"]["ext"], arrays["keys"][:], arrays["stems"][:] = codes, keys.buffer, stems.buffer
            arrays["members"].flush()  # the writers map it: the extensions must be there
            bar = progress_bar(source.count, f"pack {folder.name}", show)
            shards = []
            for shard in _map(_write, [ShardJob(n, order[s:e], s) for n, (s, e) in enumerate(ranges)], workers):
                shards.append(shard)
                if bar is not None:
                    bar.update(shard.samples)
            if bar is not None:
                bar.close()
            facts = {"split": folder.name, "task": source.task, "dataset": source.name, "classes": source.classes}
            facts.update(count=source.count, extensions=extensions)
            return finish(folder, arrays, facts, shards), facts
    finally:
        _JOB = None


def _merge(
    parts: List[Tuple[np.ndarray, np.ndarray, List[str], np.ndarray]],
) -> Tuple[np.ndarray, np.ndarray, List[str], np.ndarray]:
    """The plan's chunks as one: their extension tables as one table, in order of first use."""
    table: Dict[str, int] = {}
    codes = []
    for _, _, names, local in parts:
        remap = np.array([table.setdefault(name, len(table)) for name in names] or [0], np.uint16)
        codes.append(remap[local] if len(local) else local)
    empty = (np.zeros(0, np.uint32), np.zeros(0, np.uint64), np.zeros(0, np.uint16))
    return (
        np.concatenate([p[0] for p in parts]) if parts else empty[0],
        np.concatenate([p[1] for p in parts]) if parts else empty[1],
        list(table),
        np.concatenate(codes) if codes else empty[2],
    )
