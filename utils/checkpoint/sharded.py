"""Sharded checkpoints (``dist.mode=fsdp``): one DCP directory per checkpoint point, rotation, ``last``/``best`` links.

A checkpoint point (every rank calls ``save``; the run's folder is shared by all ranks)::

    1. .epoch<E>_batch<B>.dcp.tmp/   every rank writes its shards of {model, optimizer} with
                                     torch.distributed.checkpoint; rank 0 writes ``.metadata`` last
    2. state.pt (+ .sha256)          rank 0: the rest of the training state (``utils/checkpoint/state.py``)
    3. SHA256SUMS                    rank 0: the digest of every file of the directory
    4. epoch<E>_batch<B>.dcp/        rank 0 renames the directory into place: complete from here on
    5. last.dcp, best.dcp            symbolic links renamed into place; then rotation as in store.py

A directory under a checkpoint's name is complete; one without ``.metadata`` (half-written),
``state.pt`` or whose files fail ``SHA256SUMS`` (copied in part, damaged, a file not listed) is
skipped on resume with a warning, as a file failing its checksum is. Nothing in it runs code when
it is read (``dcp_safe.py``): a ``.metadata`` that asks for anything but DCP's metadata classes is
refused outright, never fallen back from. The validation records (``records.py``) sit beside the
directories, as beside files.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

from utils.checkpoint.files import file_digest, fsync_dir, newest_first, write_checkpoint, write_text_atomic
from utils.checkpoint.readers import load_file
from utils.checkpoint.records import SUFFIX, record_path
from utils.checkpoint.sharded_layout import BEST, LAST, NAME, STATE, SUMS, TENSORS
from utils.checkpoint.sums import check_sums, sums_text
from utils.distributed.ops import barrier, get_rank
from utils.errors import CheckpointError
from utils.files.owned import make_dirs, make_new_folder, point_link, remove, remove_tree, replace

log = logging.getLogger(__name__)


def verify_dir(path: Path) -> Optional[str]:
    """None when the directory is complete and its files match ``SHA256SUMS``, else what is wrong.

    ``.metadata`` is read first, by the restricted unpickler: one that asks for more than DCP's
    metadata raises UnsafeFileError (refused, not a damaged directory to fall back from)."""
    from utils.checkpoint.dcp_safe import read_metadata
    from utils.checkpoint.safe_load import UnsafeFileError

    path = Path(path)
    if not (path / ".metadata").is_file():
        return "no .metadata: it is half-written (the write did not finish)"
    try:
        read_metadata(path)
    except UnsafeFileError:
        raise
    except CheckpointError as err:  # damaged metadata: a problem like a failed checksum
        return str(err)
    if not (path / STATE).is_file() or not (path / SUMS).is_file():
        return f"no {STATE} or {SUMS}: the write did not finish"
    return check_sums(path, SUMS, file_digest)


def read_state(path: Path) -> Dict[str, Any]:
    """The non-tensor training state of a sharded checkpoint, after checking every shard; CheckpointError when it fails."""
    path = Path(path)
    problem = verify_dir(path)
    if problem:
        raise CheckpointError(f"sharded checkpoint '{path}': {problem}; use an earlier checkpoint of the run")
    return load_file(path / STATE)


def load_full(path: Path, key: str) -> Dict[str, Any]:
    """Entry ``key`` (model, optimizer) of a sharded checkpoint as whole tensors, read by this process alone
    (without running code: ``dcp_safe.py``)."""
    from utils.checkpoint.dcp_safe import load_keys

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to load in a single process": it is
        return load_keys(path, {key})[key]


def numbered_optimizer_state(named: Dict[str, Any]) -> Dict[str, Any]:
    """An optimizer state keyed by parameter name (DCP's) in ``torch.optim``'s own form: parameters numbered in group order."""
    index = {name: i for i, name in enumerate(n for group in named["param_groups"] for n in group["params"])}
    groups = [{**group, "params": [index[n] for n in group["params"]]} for group in named["param_groups"]]
    return {"state": {index[name]: value for name, value in named["state"].items()}, "param_groups": groups}


def load_sharded_optimizer(path: Path, model: Any, optimizer: Any) -> None:
    """Each rank reads its shards of the optimizer state of checkpoint ``path`` (resharded to this world size); collective."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict, set_optimizer_state_dict

    from utils.checkpoint.dcp_safe import load_into

    state = {"optimizer": get_optimizer_state_dict(model, optimizer)}
    for group in state["optimizer"]["param_groups"]:
        # checkpoints of 0.3.0 and older lack it (DCP wants every key asked for); the caller keeps this run's
        group.pop("names", None)
    load_into(state, Path(path))  # byte entries (param_groups) weights-only, .metadata restricted
    set_optimizer_state_dict(model, optimizer, state["optimizer"])


class ShardedCheckpointStore:
    """The sharded checkpoints of one run in ``directory``; ``save`` is collective, the rest is rank 0's."""

    collective = True

    def __init__(self, directory: Path, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.root = self.directory.parent  # the run folder: writes below it go through utils/files/owned.py
        self.keep = max(int(keep), 1)
        self.best: Optional[str] = None

    def numbered(self) -> List[Path]:
        """The checkpoint directories, newest first."""
        return [path for path in newest_first(self.directory, NAME) if not path.is_symlink()]

    def candidates(self) -> List[Path]:
        return self.numbered()

    def path_for(self, epoch: int, batch: int) -> Path:
        return self.directory / f"epoch{epoch:04d}_batch{batch:06d}.dcp"

    def save(self, state: Dict[str, Any], epoch: int, batch: int) -> Path:
        """Write ``state`` (``model`` and ``optimizer`` sharded, the rest in state.pt) as the checkpoint of (epoch, batch)."""
        import torch.distributed.checkpoint as dcp

        path = self.path_for(epoch, batch)
        tmp = self.directory / f".{path.name}.tmp"
        main = get_rank() == 0
        if main:
            make_dirs(self.root, self.directory)
            with contextlib.suppress(OSError):
                remove_tree(self.root, tmp)
            make_new_folder(self.root, tmp)
        barrier()
        try:
            with warnings.catch_warnings():
                # dist.mode=fsdp in one process
                warnings.filterwarnings("ignore", message=".*assuming the intent is to save in a single process")
                dcp.save({key: state[key] for key in TENSORS}, checkpoint_id=str(tmp))
            if main:
                write_checkpoint({k: v for k, v in state.items() if k not in TENSORS}, tmp / STATE)
                write_text_atomic(tmp / SUMS, sums_text(tmp, SUMS, file_digest))
                fsync_dir(tmp)
                remove(self.root, record_path(path))
                remove_tree(self.root, path)  # a rerun after a fallback past it
                replace(self.root, tmp, path)
                self.link(path, LAST)
                if self.best == path.name:
                    self.link(path, BEST)
                fsync_dir(self.directory)
                self._prune()
        except OSError as err:
            raise CheckpointError(
                f"could not write sharded checkpoint '{path}' ({err.strerror or err}); earlier checkpoints are intact; free disk space and resume with --resume"
            ) from err
        return path

    def link(self, source: Path, name: str) -> None:
        """Point ``name`` at the directory ``source`` (a relative symbolic link renamed into place)."""
        point_link(self.root, self.directory / name, source.name)  # a link the framework makes, to a name beside it

    def link_best(self, path: Path) -> None:
        self.link(path, BEST)
        fsync_dir(self.directory)

    def links_to(self, name: str, target: Path) -> bool:
        link = self.directory / name
        return link.is_symlink() and os.readlink(link) == target.name

    def _prune(self) -> None:
        for old in self.numbered()[self.keep :]:
            if old.name != self.best:
                with contextlib.suppress(OSError):
                    remove_tree(self.root, old)
                remove(self.root, record_path(old))
        for side in self.directory.glob(f"*.dcp{SUFFIX}"):
            if not side.with_name(side.name[: -len(SUFFIX)]).exists():
                remove(self.root, side)

    def remove_temporaries(self) -> None:
        """What an interrupted save left (temporary directories and links); rank 0, before training."""
        for path in self.directory.glob(".*"):
            if path.name.endswith(".tmp") and path.is_dir() and not path.is_symlink():
                with contextlib.suppress(OSError):
                    remove_tree(self.root, path)
            elif path.name.endswith(".link"):
                remove(self.root, path)

    def repair_best(self) -> None:
        """After a resume, point ``best.dcp`` at the directory the resumed state names as best (rank 0)."""
        if self.best is None:
            return
        target, best = self.directory / self.best, self.directory / BEST
        if not target.is_dir():
            log.warning(
                "the best checkpoint '%s' named by the resumed state no longer exists; removing best.dcp", target
            )
            if best.is_symlink():
                remove(self.root, best)
            self.best = None
        elif not self.links_to(BEST, target):
            self.link(target, BEST)
            fsync_dir(self.directory)

    def best_path(self) -> Path:
        if self.best is not None and (self.directory / self.best).is_dir():
            return self.directory / self.best
        log.warning("no best checkpoint in '%s'; testing '%s', the last one", self.directory, LAST)
        return self.directory / LAST

    def read_while_checking(self, path: Path) -> None:
        """Nothing: a directory is checked by its ``SHA256SUMS``, never read whole (``CheckpointStore``'s twin)."""
        return None

    def latest_usable(self) -> Optional[Path]:
        """The newest complete checkpoint directory, skipping (with a warning) those that are not."""
        problems = []
        for path in self.candidates():
            problem = verify_dir(path)
            if problem is None:
                if problems:
                    log.warning("resuming from '%s' after skipping %d unusable checkpoint(s)", path, len(problems))
                return path
            log.warning("sharded checkpoint '%s': %s; falling back to the checkpoint before it", path, problem)
            problems.append(f"'{path}': {problem}")
        if problems:
            raise CheckpointError(
                f"no usable checkpoint in '{self.directory}': {'; '.join(problems)}; move the folder away to start afresh"
            )
        return None
