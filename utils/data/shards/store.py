"""Where shards live: a local folder or an S3 prefix (``s3://bucket/prefix``), behind one small interface."""

from __future__ import annotations

from pathlib import Path
from typing import List, Protocol, Tuple

from utils.data.shards.index import INDEX
from utils.errors import DataError
from utils.files.owned import copy_in, make_dirs


class Store(Protocol):
    """Files by name (``<split>/index.json``, ``<split>/shard-000000.tar``) under one root."""

    url: str

    def read(self, name: str) -> bytes: ...

    def read_range(self, name: str, start: int, end: int) -> bytes: ...

    def download(self, name: str, dest: Path) -> None: ...

    def upload(self, source: Path, name: str) -> None: ...

    def is_empty(self) -> bool: ...

    def has(self, name: str) -> bool: ...

    def splits(self) -> List[str]: ...


class LocalStore:
    """A folder; its shards are read in place (no cache)."""

    def __init__(self, root: str) -> None:
        self.root = Path(root)
        self.url = str(root)

    def path(self, name: str) -> Path:
        return self.root / name

    def read(self, name: str) -> bytes:
        path = self.path(name)
        if path.exists() and not path.is_file():  # a FIFO blocks the read for ever, a device never ends it
            raise DataError(
                f"'{path}' is not a regular file (a folder, FIFO or device); restore it or pack the data again"
            )
        try:
            return path.read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            raise DataError(missing_index(self, name)) from None

    def has(self, name: str) -> bool:
        """Whether the file ``name`` exists (``""``: whether the root itself is a file)."""
        return self.path(name).is_file()

    def splits(self) -> List[str]:
        """The packed splits in the folder: its folders holding an index."""
        return sorted(index.parent.name for index in self.root.glob(f"*/{INDEX}")) if self.root.is_dir() else []

    def read_range(self, name: str, start: int, end: int) -> bytes:
        with open(self.path(name), "rb") as fh:
            fh.seek(start)
            return fh.read(end - start)

    def download(self, name: str, dest: Path) -> None:
        copy_in(dest.parent, self.path(name), dest, "run again")  # into the cache: never through a link

    def is_empty(self) -> bool:
        """Whether the folder is new or empty (a file is not)."""
        return not self.root.exists() or (self.root.is_dir() and not any(self.root.iterdir()))

    def upload(self, source: Path, name: str) -> None:
        target = self.path(name)
        make_dirs(self.root, target.parent)
        if source.resolve() != target.resolve():
            copy_in(self.root, source, target, "run --mode pack again")


def words(store: Store) -> Tuple[str, str]:
    """What the store's places are called: ``("folder", "a file")``, or ``("prefix", "an object")`` in S3."""
    return ("prefix", "an object") if is_s3(store.url) else ("folder", "a file")


def missing_index(store: Store, name: str) -> str:
    """Why the index ``<split>/index.json`` is not in ``store``, and what to give instead: the folder (or prefix)
    above a split's, another split, or one that --mode pack wrote; the same advice for a folder and for S3."""
    folder, a_file = words(store)
    url = store.url.rstrip("/")
    if store.has(""):
        return f"data.root '{url}' is {a_file}; give the {folder} --mode pack wrote (it holds <split>/{INDEX})"
    if store.has(INDEX):
        above = str(Path(url).parent) if folder == "folder" else url.rpartition("/")[0]
        return f"'{url}' is the {folder} of one packed split; data.root is the {folder} above it: {above}"
    splits = store.splits()
    if splits:
        split = name.split("/")[0]
        return f"'{url}' holds the packed splits {splits}, not '{split}'; check data.test_split, or pack that split"
    return f"'{url}/{name}' does not exist: data.root must be a {folder} written by --mode pack"


def is_s3(root: str) -> bool:
    return str(root).startswith("s3://")
