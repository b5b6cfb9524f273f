"""The one way to write under a folder the run owns: open, append, truncate, write whole, make folders, rename,
remove and rotate, never through a link out of that folder.

A folder the run owns is its run folder, the experiment folder, a test/predict/export/compare folder or
``--output``, the shard cache, ``--mode pack``'s output and a sweep folder. Each function here takes that
folder (``root``) and a path lexically inside it. ``root`` itself may be a link the user chose (an output
root on scratch space): it is trusted. What lies inside it is not: a run folder is copied from colleagues
and clusters, untarred, handed over, and a link inside it may name any file of the user's.

Every component below ``root`` is looked at with ``lstat`` (a link is never followed) and the file itself is
opened with ``O_NOFOLLOW``:

- a link where a **file** is written (``log.txt``, ``.lock``, a checkpoint, a temporary file) is removed, its
  target untouched, with a warning naming both; the file is then written in its place;
- a link where a **folder** is (``checkpoints/``, ``tb/``, ``trackers/``, any folder on the way to a file) is
  refused in one line (``LinkError``): the run's records would be split between two places, and what the
  folder already holds (the checkpoints a resume continues from) is the user's to copy in, not ours to drop;
  so is a link at a file the run continues (``check_kept``: a sweep's study journal);
- a file opened in place (appended, truncated, locked: ``open_fd``) is the run's own regular file: a FIFO, socket
  or device at its name is removed with a warning (writing one blocks, or reaches the device), a folder there is
  refused in one line, and a file with other hard links (a user's file linked in, a run copied with ``cp -al``) is
  replaced by a copy of its bytes first, with a warning: the other names keep what they held. A file written whole
  is renamed into place, which leaves the other names of what was there as they were.

Removing a link removes the link: nothing outside ``root`` is deleted, and a tree is removed with
``shutil.rmtree``'s link-safe walk. Rotation lists its folder as any reader does and removes each name through
``remove``, which checks the folders on the way: a rotation never reaches through a linked folder. The links the framework makes itself (``latest`` in the experiment folder,
``last.dcp``/``best.dcp`` of a sharded store) are made by ``point_link``: a name beside them, renamed over.

A link swapped in by another process between the check and the write is out of scope (the threat is a
folder handed over, not a process racing this one); ``O_NOFOLLOW`` still stops it at the file itself.

Files written whole (``write_atomic``) go to a hidden temporary name beside the file and are renamed over it
when complete, so a full disk or a missing permission never leaves a truncated file under its name; a failure
is one ``OutputError`` line naming the file, with the advice of the mode that wrote it.

Standard library, ``utils/errors.py`` and ``utils/undecodable.py`` only: the config (a leaf) saves through it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import socket
import stat
from pathlib import Path
from typing import IO, Any, BinaryIO, Callable, List, Union

from utils.errors import LinkError, OutputError
from utils.undecodable import ERRORS

log = logging.getLogger(__name__)

PathLike = Union[str, Path]
_FLAGS = {
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "r+": os.O_RDWR,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}


def _parts(root: Path, path: Path) -> List[Path]:
    """The paths from ``root`` (exclusive) down to ``path``; ValueError for a path outside ``root``.

    Both are made absolute first: a run's folder is relative to the working directory (``output/...``) while
    ``tempfile.mkstemp`` names its file by an absolute path, and the two must compare as the same folder."""
    rel = Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
    if ".." in rel.parts:
        raise ValueError(f"'{path}' is not inside '{root}'")
    found, here = [], Path(root)
    for part in rel.parts:
        here = here / part
        found.append(here)
    return found


def _target(link: Path) -> str:
    try:
        return os.readlink(link)
    except OSError:
        return "?"


def refuse(link: Path, root: Path, what: str = "a folder") -> LinkError:
    """The error for a link found where ``root`` keeps ``what`` (a folder, or a file the run continues)."""
    copy = "a real folder (a copy of what it points to: cp -rL)" if what == "a folder" else "a copy (cp -L)"
    return LinkError(
        f"'{link}' is a link (to '{_target(link)}') where the run keeps {what} of '{root}'; a run never writes "
        f"through a link out of its folder: replace the link with {copy} or move it away, and start again"
    )


def check_folder(root: PathLike, folder: PathLike) -> Path:
    """``folder`` (inside ``root``, or ``root`` itself) with no link on the way from ``root``; LinkError for one."""
    root, folder = Path(root), Path(folder)
    for part in _parts(root, folder):
        if part.is_symlink():
            raise refuse(part, root)
    return folder


def check_file(root: PathLike, path: PathLike) -> Path:
    """``path`` ready to be written: its folders checked (``check_folder``), and a link at ``path`` itself
    removed with a warning (its target untouched)."""
    root, path = Path(root), Path(path)
    check_folder(root, path.parent)
    if path.is_symlink():
        log.warning(
            "'%s' was a link (to '%s'); a run never writes through a link: the link is removed, what it pointed to is "
            "untouched, and a file of the run's own takes its place",
            path,
            _target(path),
        )
        path.unlink()
    return path


def check_kept(root: PathLike, path: PathLike) -> Path:
    """``path``, a file the run continues (a sweep's study journal: what it holds is the run's state), with no link
    on the way or at ``path``: a link is refused (LinkError), since replacing it would start the state afresh."""
    root, path = Path(root), Path(path)
    check_folder(root, path.parent)
    if path.is_symlink():
        raise refuse(path, root, "a file it continues")
    return path


def _own_inode(root: Path, path: Path, flags: int) -> None:
    """``path`` (cleared by ``check_file``) made a regular file of the run's own before ``flags`` open it in place: a
    FIFO, socket or device there is removed with a warning (opening one for writing blocks or reaches the device), a
    folder is refused (LinkError), and a file with other hard links (a user's file linked in, a run copied with
    ``cp -al``) is first replaced by a copy of its bytes: appending, truncating or rewriting it in place would change
    the file under its other names."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(found.st_mode):
        raise LinkError(
            f"'{path}' is a folder where the run writes a file of '{root}'; a run never writes into what it did not "
            "make there: move the folder away, and start again"
        )
    if not stat.S_ISREG(found.st_mode):
        log.warning(
            "'%s' was not a regular file (a FIFO, socket or device); a run writes only files of its own: it is removed "
            "and a file of the run's own takes its place",
            path,
        )
        path.unlink()
    elif found.st_nlink > 1 and not flags & os.O_EXCL:
        log.warning(
            "'%s' has %d other hard link(s); a run never writes in place into a file other names share: it continues "
            "a copy of its own, and the other names keep what they held",
            path,
            found.st_nlink - 1,
        )
        if flags & os.O_TRUNC:
            path.unlink()  # its bytes are replaced anyway: a new file
        else:
            copy_in(root, path, path, "make the folder writable and start again")


def open_fd(root: PathLike, path: PathLike, flags: int, mode: int = 0o644) -> int:
    """``os.open(path, flags | O_NOFOLLOW)`` once ``check_file`` cleared it and ``_own_inode`` made it the run's own
    regular file: the descriptor."""
    root, path = Path(root), Path(path)
    check_file(root, path)
    _own_inode(root, path, flags)
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def open_file(root: PathLike, path: PathLike, mode: str = "w", **kwargs: Any) -> IO[Any]:
    """``open(path, mode)`` for writing (``w``, ``a``, ``r+`` or ``x``, each with ``b`` for bytes), never through a
    link (``open_fd``); ``kwargs`` as ``open`` takes them (``encoding``, ``newline``, ``buffering``)."""
    fd = open_fd(root, path, _FLAGS[mode.replace("b", "")])
    try:
        return os.fdopen(fd, mode.replace("x", "w"), **kwargs)  # the flags of os.open decide; fdopen keeps them
    except BaseException:
        os.close(fd)
        raise


def make_dirs(root: PathLike, folder: PathLike) -> Path:
    """``folder`` and the folders above it up to ``root`` made where missing; LinkError for a link on the way."""
    root, folder = Path(root), Path(folder)
    Path(root).mkdir(parents=True, exist_ok=True)  # root: the user's to choose (a link to scratch space included)
    for part in _parts(root, folder):
        if part.is_symlink():
            raise refuse(part, root)
        if not part.is_dir():
            part.mkdir(exist_ok=True)
    return folder


def make_new_folder(root: PathLike, folder: PathLike) -> Path:
    """The new folder ``folder`` (its parent exists, no link on the way); FileExistsError when something (a link
    included) is there already: a name taken by another process meanwhile."""
    folder = Path(folder)
    check_folder(root, folder.parent)
    folder.mkdir()
    return folder


def writer_tag() -> str:
    """This process among all that may write the same folder: its host (8 hex digits of the name's sha256: a
    shared home or cache seen by containers of several nodes, whose processes often have the same pids) and pid."""
    return f"{hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]}-{os.getpid()}"


def temporary_name(path: PathLike) -> Path:
    """A hidden name beside ``path`` for its bytes until they are complete (hidden: never read as an input), this
    process's own (``writer_tag``)."""
    path = Path(path)
    return path.with_name(f".{path.name}.{writer_tag()}.tmp")


def write_atomic(
    root: PathLike, path: PathLike, write: Callable[[BinaryIO], Any], advice: str, sync: bool = False
) -> None:
    """``write(file)`` into a new hidden temporary file beside ``path`` (open for bytes; ``io.TextIOWrapper`` it for
    text), then rename it over ``path``: a link at ``path`` is replaced, never written through. ``sync``: fsynced
    before the rename. A failed write (OSError: a full disk, no permission) removes the temporary file and is an
    OutputError naming ``path`` with ``advice``."""
    path = Path(path)
    tmp = temporary_name(path)
    check_folder(root, path.parent)
    try:
        tmp.unlink(missing_ok=True)  # a leftover, or a link planted at the name: gone, not written through
        with open_file(root, tmp, "xb") as fh:
            write(fh)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        replace(root, tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise OutputError.writing(path, err, advice) from err


def write_bytes(root: PathLike, path: PathLike, data: bytes, advice: str, sync: bool = False) -> None:
    """``data`` as the whole of ``path`` (see ``write_atomic``)."""
    write_atomic(root, path, lambda fh: fh.write(data), advice, sync)


def write_text(root: PathLike, path: PathLike, text: str, advice: str, sync: bool = False) -> None:
    """``text`` (UTF-8; a file name that is not UTF-8 as its bytes, ``\\xNN``: ``utils/undecodable.py``) as the whole
    of ``path`` (see ``write_atomic``)."""
    write_bytes(root, path, text.encode("utf-8", ERRORS), advice, sync)


def replace(root: PathLike, source: PathLike, target: PathLike) -> None:
    """Rename ``source`` over ``target``, both inside ``root`` (a link at ``target`` is replaced, with a warning)."""
    check_folder(root, Path(source).parent)
    check_file(root, target)
    os.replace(source, target)


def point_link(root: PathLike, path: PathLike, name: str) -> None:
    """A link the framework owns: ``path`` -> ``name``, a name beside it (never a path), renamed into place
    atomically (what was at ``path``, a link included, is replaced, not followed)."""
    if Path(name).name != name or name in ("", ".", ".."):
        raise ValueError(f"a link of the framework points to a name beside it, not to '{name}'")
    path = Path(path)
    check_folder(root, path.parent)
    tmp = path.with_name(f".{path.name}.{writer_tag()}.link")
    tmp.unlink(missing_ok=True)
    os.symlink(name, tmp)
    os.replace(tmp, path)


def remove(root: PathLike, path: PathLike) -> None:
    """Remove the file (or link: the link itself) ``path``; nothing when it is missing."""
    check_folder(root, Path(path).parent)
    Path(path).unlink(missing_ok=True)


def remove_tree(root: PathLike, path: PathLike) -> None:
    """Remove the folder ``path`` and what it holds (a link there, or inside it, goes as a link: what it points
    to is untouched); nothing when it is missing."""
    path = Path(path)
    check_folder(root, path.parent)
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)  # link-safe: it never descends into a link (shutil.rmtree.avoids_symlink_attacks)


def remove_folder(root: PathLike, folder: PathLike) -> None:
    """Remove the empty folder ``folder`` (a link there: the link itself)."""
    folder = Path(folder)
    check_folder(root, folder.parent)
    if folder.is_symlink():
        folder.unlink()
    else:
        folder.rmdir()


def copy_in(root: PathLike, source: PathLike, target: PathLike, advice: str, sync: bool = False) -> None:
    """The bytes of ``source`` (read from anywhere) as the whole of ``target`` inside ``root`` (``write_atomic``)."""

    def write(fh: BinaryIO) -> None:
        with open(source, "rb") as src:
            shutil.copyfileobj(src, fh, 1 << 20)

    write_atomic(root, target, write, advice, sync)


def hard_link(root: PathLike, source: PathLike, target: PathLike) -> None:
    """A new name ``target`` (inside ``root``, nothing there yet) for the file ``source``: ``os.link``, which
    creates and never opens; a link at ``target`` is removed first (``check_file``)."""
    check_file(root, target)
    os.link(source, target)
