"""``--mode pack --output DIR_OR_S3 [--shard-size 64MB]``: the configured dataset's splits as shards.

Each split (train, val and ``data.test_split``) is built as training would build it,
without transforms, and written by ``utils/data/shards/writer.py``: the stored file
bytes of each sample in tar shards of about ``--shard-size`` bytes, and ``index.json``.
An S3 output is written to a temporary folder first and uploaded shard by shard, the
index last, so a prefix with an index is complete. ``--output`` is refused before anything is
read when it is not empty, lies inside the data being packed or inside a run folder, or cannot be
written (``check_output``).

Under torchrun or srun (as training launches: one node or many) the processes split each split's
shards among them and rank 0 writes the index once all are written: any number of processes packs
the same bytes. A pack killed part-way is completed by the same command, which keeps the shards
already written (``pack_records.py``) and refuses an output packed with other data or settings.
"""

from __future__ import annotations

import argparse
import inspect
import logging
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, TypeVar

from utils.commands.command_line import Command
from utils.commands.options import ModeParser, add_config
from utils.commands.started import resolve_config
from utils.config.schema import Config
from utils.data.shards import pack_records
from utils.data.shards.index import INDEX, Shard
from utils.data.shards.index_load import check_packed
from utils.data.shards.pack_records import Records
from utils.data.shards.pack_split import SplitJob, pack_split
from utils.data.shards.sizes import parse_size
from utils.data.shards.sources import PackSource, classes_of
from utils.data.shards.store import Store, is_s3
from utils.data.shards.stores import open_store
from utils.data.shards.writer import shard_name
from utils.distributed.ops import barrier, decided_by_rank0, get_rank
from utils.distributed.process_group import cleanup, init_distributed
from utils.errors import ConfigError, DataError, OutputError, UserError
from utils.files.owned import remove
from utils.files.writable import why_not_writable
from utils.log import setup_logging
from utils.registry import DATASETS
from utils.run.folder import place_in_run
from utils.threads import local_processes, usable_cores

log = logging.getLogger(__name__)
DEFAULT_SHARD_SIZE = "64MB"


def _splits(cfg: Config) -> List[str]:
    return list(dict.fromkeys(("train", "val", cfg.data.test_split)))


def _build(cfg: Config, split: str, classes: Optional[List[Any]]) -> Any:
    """The split as ``build_dataset`` makes it, but untransformed: its samples are stored as they are."""
    args: Dict[str, Any] = dict(cfg.data.args)
    takes_classes = "classes" in inspect.signature(DATASETS.get(cfg.data.name)).parameters
    if classes is not None and "classes" not in args and takes_classes:
        args["classes"] = list(classes)
    return DATASETS.build(cfg.data.name, split=split, root=cfg.data.root, transform=None, **args)


def _within(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or lies inside it: local paths with links resolved, S3 URLs by their prefix."""
    if is_s3(path) or is_s3(root):
        return is_s3(path) and is_s3(root) and f"{path.rstrip('/')}/".startswith(f"{root.rstrip('/')}/")
    return Path(path).expanduser().resolve().is_relative_to(Path(root).expanduser().resolve())


def check_output(output: str, data_root: Optional[str]) -> None:
    """A UserError, before anything is read or written, for an ``--output`` that is not pack's to write: inside the
    data being packed (its new folders would be read as part of it: a split, a class), inside a run folder (whose
    files are the run's own), or a folder it cannot write."""
    if data_root is not None and _within(output, data_root):
        raise ConfigError(
            f"--output '{output}' is or lies inside data.root '{data_root}', the data being packed, which would read "
            "its new folders as data; give a folder outside it"
        )
    if is_s3(output):
        return
    where = place_in_run(Path(output))
    if where is not None:
        raise ConfigError(
            f"--output '{output}' {where}; --mode pack never writes into a run: give a folder outside every run"
        )
    problem = why_not_writable(Path(output))
    if problem is not None:
        raise OutputError(f"--output '{output}' {problem}; give --mode pack a new or empty folder it can write")


T = TypeVar("T")


def _agreed(decide: Callable[[], T]) -> T:
    """``decide()`` on rank 0, its answer on every rank; bad input found there is rank 0's one ``error:`` line, and
    the other ranks leave with its exit code, silent (one line for the job, not one per rank)."""
    try:
        return decided_by_rank0(decide)
    except UserError:
        if get_rank() == 0:
            raise
        raise SystemExit(2) from None


def _begin(cfg: Config, output: str, store: Store, size: int) -> Dict[str, Any]:
    """The pack's manifest: a new pack into an empty output, or the one started there with the same settings."""
    check_output(output, cfg.data.root)
    if is_s3(output):
        store.check_bucket()  # type: ignore[attr-defined]  # a missing bucket or refused credentials: before any work
    return pack_records.begin(store, pack_records.settings(cfg.data, size))


def pack(cfg: Config, output: str, shard_size: Optional[str], workers: Optional[int] = None) -> Dict[str, Any]:
    """Packs every split of ``cfg``'s dataset into ``output`` (this rank's shards; rank 0 the indexes); per split
    (on rank 0): samples, shards, bytes."""
    size = parse_size(shard_size or DEFAULT_SHARD_SIZE, "--shard-size")
    store = open_store(output)
    results: Dict[str, Any] = {}
    classes = None
    with tempfile.TemporaryDirectory(prefix="pack-") as tmp:
        manifest = _agreed(lambda: _begin(cfg, output, store, size))
        packed = []
        for split in _splits(cfg):
            start = time.perf_counter()
            try:
                dataset = _build(cfg, split, classes)
            except DataError as err:
                if split == "train":
                    raise
                log.warning("split '%s' not packed: %s", split, err)
                continue
            classes = classes_of(dataset) if split == "train" else classes
            folder = (Path(tmp) if is_s3(output) else Path(store.url)) / split  # type: ignore[attr-defined]
            records = Records(store, split, Path(tmp))
            job = SplitJob(PackSource(dataset, cfg.data.name), folder, _uploader(store, split), records)
            job.agree = lambda plan, split=split: _agreed(  # type: ignore[misc]
                lambda: pack_records.agree(store, manifest, split, plan, Path(tmp))
            )
            header, _ = pack_split(job, size, workers or default_workers(), split == "train", True)
            if header is None:  # another rank's: rank 0 writes the index
                continue
            packed.append((records, len(header.shards)))
            if is_s3(output):  # the shards went up as they were written; the index last: it names only shards there
                for file in (*header.arrays.values(), Shard(INDEX, 0, "", 0)):
                    store.upload(folder / file.name, f"{split}/{file.name}")
            else:  # checked whole once, here: starts from the pack trust the stamp this leaves (checked.py)
                check_packed(folder)
            total = sum(shard.bytes for shard in header.shards)
            results[split] = {"samples": header.count, "shards": len(header.shards), "bytes": total}
            log.info(
                "packed %s: %d samples in %d shard(s), %.1f MB, %.1f s -> %s/%s",
                split,
                header.count,
                len(header.shards),
                total / 1e6,
                time.perf_counter() - start,
                store.url,
                split,
            )
        if get_rank() == 0:  # every index written: the records, then the manifest, go (the pack is complete)
            for records, shards in packed:
                records.clear(shards, shard_name)
            pack_records.end(store)
    return results


def _uploader(store: Store, split: str) -> Optional[Callable[[Path], None]]:
    """For an S3 output: put a written shard into the prefix and remove the local copy (the disk holds a shard
    per writer, not the split)."""
    if not is_s3(store.url):
        return None

    def upload(path: Path) -> None:
        store.upload(path, f"{split}/{path.name}")
        remove(path.parent, path)

    return upload


def default_workers() -> int:
    """``--workers`` left out: the usable cores, shared among this machine's processes of a launch (torchrun's
    ``LOCAL_WORLD_SIZE``; srun gives each task its own cores, ``--cpus-per-task``, as its affinity)."""
    return max(1, usable_cores() // local_processes())


def add_options(parser: ModeParser) -> None:
    add_config(parser)
    parser.add_argument("--output", help="where the shards go: a new or empty folder, or s3://bucket/prefix")
    parser.add_argument("--shard-size", help=f"bytes per shard, e.g. {DEFAULT_SHARD_SIZE} (the default)")
    parser.add_argument(
        "--workers",
        type=int,
        help="processes writing shards, per launched process (default: the usable cores, shared among a node's "
        "processes); any count packs the same bytes",
    )


def needs_output(parser: ModeParser, args: argparse.Namespace) -> None:
    if not args.output:
        parser.error("--mode pack needs --output DIR or s3://bucket/prefix")


def run(args: argparse.Namespace) -> int:
    """No device and no run folder; a process group (gloo) under torchrun or srun; one summary line (rank 0)."""
    setup_logging(None, 0)
    cfg = resolve_config(args, "pack", None)
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be 1 or more (processes writing shards), got {args.workers}")
    info = init_distributed("cpu", "gloo", cfg.dist.timeout_s)
    setup_logging(None, info.rank)
    results = pack(cfg, args.output, args.shard_size, args.workers)
    barrier()  # rank 0 removed the records: the job ends complete
    cleanup()
    if info.is_main:
        parts = [f"{split} {r['samples']} samples in {r['shards']} shard(s)" for split, r in results.items()]
        print(f"pack: {', '.join(parts)} -> {args.output}", flush=True)
    return 0


COMMAND = Command(
    "--mode pack",
    "pack",
    "write the config's dataset (train, val and data.test_split) as shards into --output",
    add_options,
    run,
    needs_output,
)
