"""Reading sharded (DCP) checkpoints without running code.

torch's DCP reader unpickles ``.metadata`` with ``pickle.load`` and its load planners read
non-tensor entries (the optimizer's ``param_groups``) with ``torch.load(weights_only=False)``:
a crafted directory would run code through either. Here ``.metadata`` is read by an
unpickler that admits only DCP's metadata classes (the dataclasses and enums of
``torch.distributed.checkpoint.metadata`` and ``.filesystem``, ``torch.Size``, torch's
dtypes, layouts and memory formats, ``pathlib`` paths) and builtin containers, and the byte
entries are read weights-only (``safe_load.py``). Every ``dcp.load`` of the framework goes
through ``load_into``/``load_keys``; ``--trust-file DIR`` reads a directory fully.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import io
import pathlib
import pickle
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Optional, Tuple, TypeVar

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner, _EmptyStateDictLoadPlanner
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta

from utils.checkpoint.safe_load import LOAD_ERRORS, is_trusted, one_line_reason, refusal, weights_only_load
from utils.errors import CheckpointError, UserError

METADATA = ".metadata"
T = TypeVar("T")


@functools.lru_cache(maxsize=None)
def metadata_classes() -> Dict[Tuple[str, str], Any]:
    """(module, name) -> object: everything a DCP ``.metadata`` pickle may name."""
    import importlib

    from torch.distributed.checkpoint import filesystem, metadata

    allowed: Dict[Tuple[str, str], Any] = {}
    modules = [metadata, filesystem]
    try:  # where torch 2.1 kept TensorProperties: metadata it wrote names this module
        modules.append(importlib.import_module("torch.distributed._shard.sharded_tensor.metadata"))
    except ImportError:
        pass
    for module in modules:
        for name, obj in vars(module).items():
            if (
                isinstance(obj, type)
                and obj.__module__ == module.__name__
                and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))
            ):
                allowed[(module.__name__, name)] = obj
    for name, obj in vars(torch).items():
        if isinstance(obj, (torch.dtype, torch.layout, torch.memory_format)):
            allowed[("torch", name)] = obj
    allowed[("torch", "Size")] = torch.Size
    allowed[("torch.serialization", "_get_layout")] = torch.serialization._get_layout  # a lookup by layout name
    for name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath", "Path"):  # StorageMeta.checkpoint_id
        # Python 3.13 pickles pathlib._local
        allowed[("pathlib", name)] = allowed[("pathlib._local", name)] = getattr(pathlib, name)
    for name in ("set", "frozenset", "bytearray", "complex", "slice", "range"):  # containers older protocols name
        allowed[("builtins", name)] = getattr(__import__("builtins"), name)
    allowed[("collections", "OrderedDict")] = __import__("collections").OrderedDict
    return allowed


class MetadataUnpickler(pickle.Unpickler):
    """An unpickler that builds DCP's metadata and nothing else: any other global is refused before it is looked up."""

    def __init__(self, file: IO[bytes], source: str) -> None:
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str) -> Any:
        found = metadata_classes().get((module, name))  # exact names: no dotted attribute ("Path.touch") gets through
        if found is None:
            raise refusal(self.source, f"{module}.{name}", Path(self.source).parent)  # trust the whole directory
        return found


def _check_storage(metadata: Metadata, source: str) -> None:
    """Every shard the metadata points at is a plain file name in the directory, never a path elsewhere."""
    storage = getattr(metadata, "storage_data", None)
    if not isinstance(storage, dict):
        raise CheckpointError(f"'{source}' has no table of shards (storage_data): the directory is damaged")
    for info in storage.values():
        relative = getattr(info, "relative_path", None)
        if not isinstance(relative, str) or relative in ("", ".", "..") or "/" in relative or "\\" in relative:
            raise CheckpointError(
                f"'{source}' points at shard {relative!r}, not a file of its directory: the directory is damaged or crafted"
            )


def load_metadata(file: IO[bytes], source: str, trusted: bool = False) -> Metadata:
    """A DCP ``.metadata`` read from ``file``: restricted unpickling unless ``trusted``.

    UnsafeFileError naming what a refused file asked for; CheckpointError when it is not DCP metadata."""
    try:
        metadata = pickle.load(file) if trusted else MetadataUnpickler(file, source).load()
    except LOAD_ERRORS as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(
            f"'{source}' is corrupt or not DCP metadata ({type(err).__name__}: {one_line_reason(err)})"
        ) from err
    if not isinstance(metadata, Metadata):
        raise CheckpointError(f"'{source}' holds a {type(metadata).__name__}, not DCP metadata")
    _check_storage(metadata, source)
    return metadata


def read_metadata(directory: Path) -> Metadata:
    """The checked ``.metadata`` of the sharded checkpoint ``directory``."""
    path = Path(directory) / METADATA
    with open(path, "rb") as fh:
        return load_metadata(fh, str(path), is_trusted(path))


class SafeReader(FileSystemReader):
    """DCP's file system reader with ``.metadata`` read by ``load_metadata``."""

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as fh:
            metadata = load_metadata(fh, str(path), is_trusted(path))
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class _SafeBytes:
    """``load_bytes`` of DCP's planners, weights-only (theirs unpickles with ``weights_only=False``)."""

    source: str = ""
    flatten_state_dict: bool
    state_dict: Dict[str, Any]
    original_state_dict: Dict[str, Any]
    mappings: Dict[str, Any]

    def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
        fqn = read_item.dest_index.fqn
        if is_trusted(self.source):
            obj = torch.load(value, weights_only=False)
        else:
            obj = weights_only_load(value, f"{self.source} (entry {fqn})", map_location=None, trust=self.source)
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[fqn], obj)
        else:
            self.state_dict[fqn] = obj


class SafeLoadPlanner(_SafeBytes, DefaultLoadPlanner):
    """``dcp.load``'s default planner, byte entries read weights-only."""

    def __init__(self, source: Path) -> None:
        super().__init__()
        self.source = str(source)


class SafeEmptyPlanner(_SafeBytes, _EmptyStateDictLoadPlanner):
    """The planner that rebuilds a state from the metadata alone (one process reads whole tensors), byte entries read weights-only."""

    def __init__(self, source: Path, keys: Optional[Iterable[str]] = None) -> None:
        super().__init__(keys=None if keys is None else set(keys))
        self.source = str(source)


def unwrapped(call: Callable[[], T]) -> T:
    """Run a DCP load; a UserError raised inside it (a refused entry) comes out as itself, not
    inside DCP's CheckpointException, so it is shown as its one line."""
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        return call()
    except CheckpointException as err:
        for failure in err.failures.values():
            cause = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(cause, UserError):
                raise cause from None
        raise


def load_into(state: Dict[str, Any], directory: Path) -> None:
    """``dcp.load(state, ...)`` from ``directory``, in place (every rank calls it; resharded to this world size)."""
    import torch.distributed.checkpoint as dcp

    unwrapped(lambda: dcp.load(state, storage_reader=SafeReader(str(directory)), planner=SafeLoadPlanner(directory)))


def load_keys(directory: Path, keys: Iterable[str]) -> Dict[str, Any]:
    """The entries ``keys`` of ``directory`` as whole tensors (what ``_load_state_dict_from_keys`` reads, safely)."""
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict_loader import _load_state_dict

    state: Dict[str, Any] = {}
    no_dist = not (dist.is_available() and dist.is_initialized())
    reader, planner = SafeReader(str(directory)), SafeEmptyPlanner(directory, keys)
    unwrapped(lambda: _load_state_dict(state_dict=state, storage_reader=reader, no_dist=no_dist, planner=planner))
    return state
