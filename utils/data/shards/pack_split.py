"""Packing one split with the launched processes (torchrun, srun: ranks) and ``workers`` processes each: the plan
from the members' sizes, then each shard written by one process (``writer.py``). Nothing is encoded: a file's
bytes are copied, an in-memory tensor saved as ``.npy``.

The plan (a stat per file, in parallel; every rank makes the same) fixes which samples each shard holds, so the
shards, the index and the checksums are the same for any number of ranks and workers. Shard ``n`` is rank
``n % world``'s; each written shard leaves its record (``pack_records.py``: its members' rows, its sha256), and
after every rank wrote its shards, rank 0 alone writes the index's arrays from the plan and the records, then
``index.json`` last. A rerun of a killed pack skips the shards whose records still match their files. The
processes hold a few numbers per sample (the plan), not the index. The training split's samples go into the
shards in a seeded shuffle (the index keeps the dataset's order): a folder's order is class by class, and a
shard-window order (``data.args.shuffle_window``) would otherwise see few classes in each window.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import torch

from utils.data.shards.index import Header, Shard
from utils.data.shards.pack_records import Records
from utils.data.shards.sources import PackSource, contents, sizes
from utils.data.shards.store import LocalStore
from utils.data.shards.writer import (
    ROW,
    ShardJob,
    create_arrays,
    finish,
    plan_shards,
    shard_name,
    tar_bytes,
    write_shard,
)
from utils.data.string_table import StringTable
from utils.distributed.ops import barrier, get_rank, get_world_size
from utils.errors import DataError, OutputError
from utils.files.owned import make_dirs
from utils.log import progress_bar

CHUNK = 4096  # samples per task of the plan


@dataclass
class SplitJob:
    """What the writer processes inherit when they fork: the samples, where their shards go, where a finished
    shard is uploaded (S3: ``upload(local file)``, which then removes it), the shards' records (default: beside
    the split's folder, as a local pack keeps them), ``agree(fingerprint)``: the plan checked against the one the
    pack started with, and each sample's member count (the plan's)."""

    source: PackSource
    folder: Path
    upload: Optional[Callable[[Path], None]] = None
    records: Optional[Records] = None
    agree: Optional[Callable[[str], None]] = None
    counts: Optional[np.ndarray] = None


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
    """Writes the shard, uploads it (S3), then leaves its record: a record names only a shard in the output."""
    assert _JOB is not None and _JOB.counts is not None and _JOB.records is not None
    with written(_JOB.folder):
        rows = np.zeros(_members(_JOB.counts, job), ROW)
        shard = write_shard(_JOB.folder, job, lambda at: contents(_JOB.source.members(at)), rows)
        if _JOB.upload is not None:
            _JOB.upload(_JOB.folder / shard.name)
        _JOB.records.save(shard, rows)
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
) -> Tuple[Optional[Header], Dict[str, Any]]:
    """Writes this rank's shards of the split of ``job.source`` into ``job.folder``, and on rank 0 the index once
    every rank's are written: (the header, rank 0's; None on the others, the facts)."""
    global _JOB
    source, folder = job.source, job.folder
    if job.records is None:
        job.records = Records(LocalStore(str(folder.parent)), folder.name, folder)
    _JOB = job
    try:
        with written(folder):
            chunks = [(start, min(start + CHUNK, source.count)) for start in range(0, source.count, CHUNK)]
            counts, member_sizes, extensions, codes = _merge(list(_map(_plan_chunk, chunks, workers)))
            job.counts, first = counts, np.cumsum(counts, dtype=np.uint64) - counts
            per_sample = np.add.reduceat(tar_bytes(member_sizes), first.astype(np.int64)) if source.count else counts
            order = (
                torch.randperm(source.count, generator=torch.Generator().manual_seed(0)).numpy()
                if shuffled
                else np.arange(source.count)
            )
            ranges = plan_shards(per_sample[order], shard_size)
            keys, stems = _lines(source.keys(), "key"), _lines(source.stems(), "stem")
            labels = np.asarray(source.labels())
            if job.agree is not None:
                job.agree(
                    _fingerprint(
                        shard_size, (counts, member_sizes, codes, labels, keys.buffer, stems.buffer, order), extensions
                    )
                )
            jobs = [ShardJob(n, order[s:e], s) for n, (s, e) in enumerate(ranges)]
            make_dirs(folder.parent, folder)
            _write_mine(job.records, jobs, workers, f"pack {folder.name}" if show else None)
            facts = {"split": folder.name, "task": source.task, "dataset": source.name, "classes": source.classes}
            facts.update(count=source.count, extensions=extensions)
            if get_rank() != 0:
                return None, facts
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
            samples["count"], samples["member"], samples["label"] = counts, first, labels
            samples["key"] = keys.offsets[:-1]
            if len(stems):  # else 0: no stems
                samples["stem"] = stems.offsets[:-1]
            for shard in jobs:
                samples["shard"][shard.samples] = shard.number
            arrays["members"]["ext"], arrays["keys"][:], arrays["stems"][:] = codes, keys.buffer, stems.buffer
            shards = []
            for shard in jobs:  # every rank's rows, in their places: each sample's rows from its first
                found = job.records.load(shard_name(shard.number), _members(counts, shard), checked=True)
                if found is None:
                    raise OutputError(
                        f"--mode pack: the record of {folder.name}/{shard_name(shard.number)} is missing; run the "
                        "same command again"
                    )
                _place(arrays["members"], found[1], first[shard.samples], counts[shard.samples])
                shards.append(found[0])
            return finish(folder, arrays, facts, shards), facts
    finally:
        _JOB = None


def _members(counts: np.ndarray, job: ShardJob) -> int:
    return int(counts[job.samples].sum())


def _place(members: np.ndarray, rows: np.ndarray, first: np.ndarray, counts: np.ndarray) -> None:
    """A shard's ``rows`` (its members in writing order) into the ``members`` array: sample ``k``'s ``counts[k]``
    rows from row ``first[k]``."""
    before = np.cumsum(counts, dtype=np.int64) - counts
    at = np.repeat(first.astype(np.int64) - before, counts.astype(np.int64)) + np.arange(len(rows), dtype=np.int64)
    for name in ROW.names:
        members[name][at] = rows[name]


def _write_mine(records: Records, jobs: List[ShardJob], workers: int, bar_name: Optional[str]) -> None:
    """This rank's shards written (those a killed pack left, their records matching their files, kept), then every
    rank's awaited. Rank 0 shows one bar for the whole split, counting the other ranks' shards by their records."""
    rank, world = get_rank(), get_world_size()
    mine, done = [job for job in jobs if job.number % world == rank], set()
    assert _JOB is not None and _JOB.counts is not None
    for job in mine:
        if records.load(shard_name(job.number), _members(_JOB.counts, job)) is not None:
            done.add(job.number)
    bar = progress_bar(sum(len(job.samples) for job in jobs), bar_name or "", bar_name is not None and rank == 0)
    others = [job for job in jobs if job.number % world != rank]
    seen = 0  # the other ranks' shards counted so far: they finish roughly in order

    def count(samples: int) -> None:
        nonlocal seen
        if bar is None:
            return
        while seen < len(others) and records.written(shard_name(others[seen].number)):
            samples += len(others[seen].samples)
            seen += 1
        bar.update(samples)

    count(sum(len(job.samples) for job in mine if job.number in done))
    todo = [job for job in mine if job.number not in done]
    for job, _ in zip(todo, _map(_write, todo, workers)):
        count(len(job.samples))
    barrier()  # every rank's shards and records are in the output
    if bar is not None:
        bar.close()


def _fingerprint(shard_size: int, arrays: Tuple[np.ndarray, ...], extensions: List[str]) -> str:
    """The plan's SHA-256: which samples, members and sizes, labels and names go into which shard."""
    digest = hashlib.sha256(json.dumps([shard_size, extensions]).encode())
    for array in arrays:
        digest.update(str(array.dtype).encode() + np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


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
