"""A run's checkpoint folder: numbered files, checksums, ``last.pt`` and ``best.pt`` links, rotation, fallback.

One checkpoint point writes the training state once::

    1. epoch<E>_batch<B>.pt   the bytes, hashed while written, fsynced; its .sha256; then the rename
    2. last.pt                a hard link to it (renamed into place), then last.pt.sha256
    3. best.pt                when ``best`` names it (a resume's repair): a hard link to it, then best.pt.sha256
    4. rotation               all but the newest ``keep`` numbered files and the best one are removed

and after an epoch's validation (``utils/engine/checkpointer.py``): the validation's record
``<file>.val.json`` (``records.py``), then, for a new best, ``best.pt`` as in step 3 (``link_best``).

(the file that step 4 would remove is, where nothing else links to it, renamed to
the temporary file of step 1 and overwritten in place: the file system reuses its
blocks instead of freeing them and allocating new ones, which made a point cost
twice a bare ``torch.save``; while it is written the newest complete checkpoint
and the best one stay as they are)

(a copy replaces a link only where the file system has no hard links, with a
warning). The name of the best file is part of the training state itself
(``best``, saved by the checkpointer, and named again by each validation record), so a crash between any two of these
steps leaves a folder where the resumed state names its best file and
``repair_best`` points ``best.pt`` at it again. Loading tries the newest file
first; one that fails its checksum (``verified.py``) or does not load is skipped with a warning
and the one before it is used.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

from utils.checkpoint.files import fsync_dir, newest_first, sidecar, write_checkpoint
from utils.checkpoint.readers import load_file
from utils.checkpoint.records import SUFFIX, record_path
from utils.checkpoint.safe_load import UnsafeFileError
from utils.checkpoint.verified import NUMBERED, load_verified, verify
from utils.errors import CheckpointError
from utils.files.owned import copy_in, hard_link, remove, replace

# load_verified (verified.py) is importable from here too, where code written before verified.py imports it
__all__ = ["BEST", "LAST", "CheckpointStore", "load_verified"]

log = logging.getLogger(__name__)

LAST = "last.pt"
BEST = "best.pt"
# errors that mean "this file system has no hard links" (a copy then does instead)
_NO_LINKS = {
    errno.EPERM,
    errno.EXDEV,
    errno.EMLINK,
    errno.ENOSYS,
    errno.EOPNOTSUPP,
    getattr(errno, "ENOTSUP", errno.EOPNOTSUPP),
}


class CheckpointStore:
    """The resumable checkpoints of one run in ``directory``; only rank 0 writes.

    ``best`` names the numbered file that holds the best epoch (None before the
    first validation, or for a run resumed from an older version's checkpoint).
    """

    collective = (
        False  # rank 0 writes a whole file (a sharded store's save is every rank's, utils/checkpoint/sharded.py)
    )

    def __init__(self, directory: Path, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.root = self.directory.parent  # the run folder: every write below it goes through utils/files/owned.py
        self.keep = max(int(keep), 1)
        self.best: Optional[str] = None
        self._warned_copy = False
        # a file without its checksum is checked by reading it whole: what that read, kept for the one who resumes
        self._read_whole: Dict[Path, Dict[str, Any]] = {}

    def numbered(self) -> List[Path]:
        """The numbered checkpoints, newest (furthest into training) first."""
        return newest_first(self.directory, NUMBERED)

    def candidates(self) -> List[Path]:
        """Files to resume from, in the order to try: numbered newest first, then a lone ``last.pt``. Only regular
        files (a link to one included): a FIFO or device under a checkpoint's name (a handed folder) would block the
        read or never end it."""
        paths = []
        for path in self.numbered():
            if path.is_file():
                paths.append(path)
            else:
                log.warning("'%s' is no checkpoint file (a folder, FIFO or device); it is passed over", path)
        last = self.directory / LAST
        if not paths and last.is_file():
            paths.append(last)
        return paths

    def path_for(self, epoch: int, batch: int) -> Path:
        return self.directory / f"epoch{epoch:04d}_batch{batch:06d}.pt"

    def save(self, state: Dict[str, Any], epoch: int, batch: int) -> Path:
        """Write ``state`` as the checkpoint of (epoch, batches consumed), link ``last.pt`` (and
        ``best.pt`` when ``self.best`` names this file), rotate; returns its path.

        A failed write (disk full, no permission) removes its temporary file,
        keeps every earlier checkpoint as it was and raises CheckpointError.
        """
        path = self.path_for(epoch, batch)
        try:
            # a record of an earlier file of this name (a rerun after a fallback) is not this one's
            remove(self.root, record_path(path))
            write_checkpoint(state, path, recycle=self._recyclable(path))
            self.link(path, LAST)
            if self.best == path.name:
                self.link(path, BEST)
            fsync_dir(self.directory)
        except OSError as err:
            raise self._write_error(path, err) from err
        self._prune()
        return path

    def _write_error(self, path: Path, err: OSError) -> CheckpointError:
        newest = next(iter(self.numbered()), None)  # numbered files appear only once complete
        kept = f"the newest complete checkpoint '{newest}' is intact" if newest else "no earlier checkpoint exists"
        return CheckpointError(
            f"could not write checkpoint '{path}' ({err.strerror or err}); {kept}; free disk space or fix the permissions of '{self.directory}' and resume with --resume"
        )

    def link(self, source: Path, name: str) -> None:
        """Point ``name`` at ``source``: a hard link renamed into place, then its checksum (when it has one) the same way."""
        for src, dst in ((source, self.directory / name), (sidecar(source), sidecar(self.directory / name))):
            if src != source and not src.is_file():
                continue
            tmp = dst.with_name(f".{dst.name}.link")
            remove(self.root, tmp)
            try:
                hard_link(self.root, src, tmp)
            except OSError as err:
                if err.errno not in _NO_LINKS:
                    raise
                self._copy(src, tmp, err)
            replace(self.root, tmp, dst)

    def _copy(self, src: Path, tmp: Path, err: OSError) -> None:
        if not self._warned_copy:
            log.warning(
                "no hard links in '%s' (%s): last.pt and best.pt are copies, each checkpoint is written more than once",
                self.directory,
                err.strerror or err,
            )
            self._warned_copy = True
        copy_in(self.root, src, tmp, "resume with --resume", sync=True)

    def link_best(self, path: Path) -> None:
        """Point ``best.pt`` at the numbered checkpoint ``path`` (``best`` already names it)."""
        self.link(path, BEST)
        fsync_dir(self.directory)

    def links_to(self, name: str, target: Path) -> bool:
        """Whether ``name`` (``best.pt``) holds the same bytes as ``target``: a link to it, or a copy with its checksum."""
        path = self.directory / name
        if not path.is_file() or not target.is_file():
            return False
        if os.path.samefile(path, target):
            return True
        own, theirs = sidecar(path), sidecar(target)
        return (
            own.is_file()
            and theirs.is_file()
            and own.read_text(errors="replace").strip() == theirs.read_text(errors="replace").strip()
        )

    def _recyclable(self, path: Path) -> Optional[Path]:
        """The oldest numbered file that this save's rotation removes anyway, to be rewritten in place.

        Never the newest complete checkpoint (it stays until the new one is complete),
        never ``best.pt``'s file, never a file another name links to (a ``last.pt`` left
        behind by a crash): what those hold stays as it is.
        """
        existing = [p for p in self.numbered() if p != path]
        for old in reversed(existing[max(self.keep - 1, 1) :]):
            try:
                # a link is never recycled: rewriting it in place would write what it points to
                if old.name != self.best and not old.is_symlink() and old.stat().st_nlink == 1:
                    return old  # its .sha256, left without a file, goes in the rotation
            except OSError:  # removed meanwhile: nothing to recycle
                pass
        return None

    def _prune(self) -> None:
        for old in self.numbered()[self.keep :]:
            if old.name != self.best:  # best.pt's file stays, so resume and fallback see what it holds
                remove(self.root, old)
                remove(self.root, sidecar(old))
                remove(self.root, record_path(old))
        # a crash between a checksum and its file's rename; records of files recycled or removed
        for suffix in (".sha256", SUFFIX):
            for side in self.directory.glob(f"*.pt{suffix}"):
                if not side.with_name(side.name[: -len(suffix)]).exists():
                    remove(self.root, side)

    def remove_temporaries(self) -> None:
        """Delete what an interrupted save left behind (temporary files and links); rank 0, before training."""
        for path in self.directory.glob(".*"):
            if path.name.endswith((".tmp", ".link")):
                remove(self.root, path)

    def repair_best(self) -> None:
        """After a resume, point ``best.pt`` at the file the resumed state names as best (rank 0).

        A crash between writing the best epoch's file and linking ``best.pt``
        leaves ``best.pt`` at the previous best while the state already names the
        new one; the state wins. When the named file is gone (a fallback past a
        corrupt newest checkpoint whose best was rotated away), ``best.pt`` is
        removed rather than left naming weights the state does not.
        """
        if self.best is None:  # a state of an older version: best.pt is a file of its own
            return
        target, best = self.directory / self.best, self.directory / BEST
        if not target.is_file():
            log.warning(
                "the best checkpoint '%s' named by the resumed state no longer exists; %s",
                target,
                "removing best.pt, which holds other weights" if best.exists() else "no best.pt",
            )
            remove(self.root, best)
            remove(self.root, sidecar(best))
            self.best = None
        elif not self.links_to(BEST, target):
            log.warning(
                "best.pt did not hold '%s', the best checkpoint the resumed state names (interrupted between the two); linking it now",
                target.name,
            )
            self.link(target, BEST)
            fsync_dir(self.directory)

    def best_path(self) -> Path:
        """The checkpoint a finished run tests: ``best.pt`` (or the numbered file ``best`` names), else ``last.pt`` with a warning."""
        best = self.directory / BEST
        if self.best is not None and (self.directory / self.best).is_file():
            target = self.directory / self.best
            return best if self.links_to(BEST, target) else target
        if self.best is None and best.is_file():  # written by an older version, which named no file
            return best
        last = self.directory / LAST
        log.warning(
            "no best checkpoint in '%s' (it was lost after a fallback to an older checkpoint); testing '%s', the last one",
            self.directory,
            last,
        )
        return last

    def read_while_checking(self, path: Path) -> Optional[Dict[str, Any]]:
        """The contents of ``path`` when ``latest_usable`` read it whole to check it (it has no checksum), else
        None: a checkpoint is deserialized once (``Checkpoint.checked``)."""
        return self._read_whole.pop(Path(path), None)

    def latest_usable(self) -> Optional[Path]:
        """The newest checkpoint that passes its checksum (or, without one, loads), or None.

        Each file skipped is named in a warning; when files exist but none is
        usable, CheckpointError lists them.
        """
        problems = []
        for path in self.candidates():
            try:
                if not sidecar(path).is_file():
                    self._read_whole = {path: load_file(path)}
                else:
                    problem = verify(path)
                    if problem:
                        raise CheckpointError(f"checkpoint '{path}': {problem}")
            except UnsafeFileError:
                raise  # a file that asks to run code is refused, not skipped for an older one
            except CheckpointError as err:
                log.warning("%s; falling back to the checkpoint before it", err)
                problems.append(str(err))
                continue
            if problems:
                log.warning("resuming from '%s' after skipping %d unusable checkpoint(s)", path, len(problems))
            return path
        if problems:
            raise CheckpointError(
                f"no usable checkpoint in '{self.directory}': {'; '.join(problems)}; move the folder away to start afresh"
            )
        return None
