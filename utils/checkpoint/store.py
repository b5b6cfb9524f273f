"""A run's checkpoint folder: numbered files, checksums, ``last.pt``, keep the last K, fall back.

Each save writes ``epoch<E>_batch<B>.pt`` atomically (the epoch and the batches
of it already consumed: the point training continues from), then its SHA-256
next to it (``.sha256``), then points ``last.pt`` at it (a hard link, or a copy
where links are not supported) and removes all but the newest
``train.keep_checkpoints`` files. Loading tries the newest file first; one that
fails its checksum or does not load (truncated by a crash of the machine or a
full disk) is skipped with a warning and the one before it is used.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from utils.checkpoint.files import atomic_save, load_file
from utils.errors import CheckpointError

log = logging.getLogger(__name__)

_NAME = re.compile(r"^epoch(\d+)_batch(\d+)\.pt$")
LAST = "last.pt"


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def verify(path: Path) -> Optional[str]:
    """None when ``path`` matches its stored checksum (or has none), else what is wrong."""
    side = _sidecar(path)
    if not side.is_file():
        return None
    expected = side.read_text().strip()
    actual = file_digest(path)
    return None if actual == expected else f"checksum mismatch (stored {expected[:12]}..., file {actual[:12]}...): the file is truncated or corrupt"


def load_verified(path: Path) -> Dict[str, Any]:
    """Load ``path`` after checking its checksum; CheckpointError when either fails."""
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    problem = verify(path)
    if problem:
        raise CheckpointError(f"checkpoint '{path}': {problem}")
    return load_file(path)


class CheckpointStore:
    """The resumable checkpoints of one run in ``directory``; only rank 0 writes."""

    def __init__(self, directory: Path, keep: int = 2) -> None:
        self.directory = Path(directory)
        self.keep = max(int(keep), 1)

    def numbered(self) -> List[Path]:
        """The numbered checkpoints, newest (furthest into training) first."""
        if not self.directory.is_dir():
            return []
        found: List[Tuple[Tuple[int, int], Path]] = []
        for path in self.directory.iterdir():
            match = _NAME.match(path.name)
            if match:
                found.append(((int(match.group(1)), int(match.group(2))), path))
        return [path for _, path in sorted(found, reverse=True)]

    def candidates(self) -> List[Path]:
        """Files to resume from, in the order to try: numbered newest first, then a lone ``last.pt``."""
        paths = self.numbered()
        last = self.directory / LAST
        if not paths and last.is_file():
            paths.append(last)
        return paths

    def path_for(self, epoch: int, batch: int) -> Path:
        return self.directory / f"epoch{epoch:04d}_batch{batch:06d}.pt"

    def save(self, state: Dict[str, Any], epoch: int, batch: int) -> Path:
        """Write ``state`` as the checkpoint of (epoch, batches consumed); returns its path.

        A failed write (disk full, no permission) removes its temporary file,
        keeps every earlier checkpoint as it was and raises CheckpointError.
        """
        path = self.path_for(epoch, batch)
        try:
            atomic_save(state, path)
            _write_text_atomic(_sidecar(path), file_digest(path))
            self._point_last_at(path)
        except OSError as err:
            previous = next((p for p in self.numbered() if p != path), None)
            kept = f"the previous checkpoint '{previous}' is intact" if previous else "no earlier checkpoint exists"
            raise CheckpointError(f"could not write checkpoint '{path}' ({err.strerror or err}); {kept}; free disk space or fix the permissions of '{self.directory}' and resume with --resume") from err
        self._prune()
        return path

    def save_as(self, state: Dict[str, Any], name: str) -> Path:
        """Write ``state`` to ``name`` (e.g. ``best.pt``) atomically, with the same error handling."""
        path = self.directory / name
        try:
            atomic_save(state, path)
        except OSError as err:
            raise CheckpointError(f"could not write checkpoint '{path}' ({err.strerror or err}); the previous '{name}' is intact; free disk space or fix the permissions of '{self.directory}'") from err
        return path

    def _point_last_at(self, path: Path) -> None:
        last, tmp = self.directory / LAST, self.directory / f".{LAST}.link"
        tmp.unlink(missing_ok=True)
        try:
            os.link(path, tmp)
        except OSError:  # no hard links on this file system: copy (the source is complete already)
            shutil.copyfile(path, tmp)
        os.replace(tmp, last)
        _write_text_atomic(_sidecar(last), _sidecar(path).read_text())

    def _prune(self) -> None:
        for old in self.numbered()[self.keep :]:
            old.unlink(missing_ok=True)
            _sidecar(old).unlink(missing_ok=True)

    def latest_usable(self) -> Optional[Path]:
        """The newest checkpoint that passes its checksum (or, without one, loads), or None.

        Each file skipped is named in a warning; when files exist but none is
        usable, CheckpointError lists them.
        """
        problems = []
        for path in self.candidates():
            try:
                if not _sidecar(path).is_file():
                    load_file(path)
                else:
                    problem = verify(path)
                    if problem:
                        raise CheckpointError(f"checkpoint '{path}': {problem}")
            except CheckpointError as err:
                log.warning("%s; falling back to the checkpoint before it", err)
                problems.append(str(err))
                continue
            if problems:
                log.warning("resuming from '%s' after skipping %d unusable checkpoint(s)", path, len(problems))
            return path
        if problems:
            raise CheckpointError(f"no usable checkpoint in '{self.directory}': {'; '.join(problems)}; move the folder away to start afresh")
        return None
