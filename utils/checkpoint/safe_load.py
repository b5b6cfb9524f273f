"""Loading that never runs code: every ``torch.save`` file the framework reads goes through ``load_torch``.

A pickle can name any function and call it while it is read (``os.system`` in an entry's
``__reduce__``). ``torch.load(weights_only=True)`` builds only tensors, numbers, strings,
containers and the types on an allowlist; ours holds exactly what our own checkpoints need
beyond torch's defaults: the numpy random state that checkpoints before framework 0.4 kept as
an ndarray (newer ones keep it as a tensor, ``utils/checkpoint/rng.py``). A file that asks for
anything else is refused with one line naming what it asked for, before any of it is built.

A file the user trusts is loaded with full unpickling when it is named with ``--trust-file PATH``
(compared by resolved path; a sharded checkpoint directory covers the files directly in it, and
no other folder does: a path that is neither is refused when it is named).
"""

from __future__ import annotations

import logging
import pickle
import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, List, Optional, Set, Tuple, Union

import numpy as np
import torch

from utils.checkpoint.sharded_layout import is_sharded_checkpoint
from utils.errors import CheckpointError

log = logging.getLogger(__name__)

# what a corrupt or foreign file raises inside torch.load (truncated zip, bad pickle opcodes, ...)
LOAD_ERRORS = (
    pickle.UnpicklingError,
    RuntimeError,
    OSError,
    EOFError,
    KeyError,
    ValueError,
    IndexError,
    TypeError,
    AttributeError,
    UnicodeDecodeError,
)

_TRUSTED: Set[Path] = set()  # files
_TRUSTED_DIRS: Set[Path] = set()  # sharded checkpoint directories, which cover the files directly in them


class UnsafeFileError(CheckpointError):
    """A file asks to run code or build a type outside the allowlist; it is refused, never fallen back from."""


def _numpy_random_state() -> List[Union[Callable[..., Any], Tuple[Callable[..., Any], str]]]:
    """numpy's ndarray reconstruction, exactly as a legacy ``np.random.get_state()`` pickles it (numpy 1 and 2 names)."""
    core = getattr(np, "_core", None) or np.core  # numpy 2 moved numpy.core to numpy._core
    reconstruct = core.multiarray._reconstruct
    return [
        (reconstruct, "numpy.core.multiarray._reconstruct"),
        (reconstruct, "numpy._core.multiarray._reconstruct"),
        np.ndarray,
        np.dtype,
        type(np.dtype(np.uint32)),  # the key of MT19937: uint32
    ]


ALLOWED = _numpy_random_state()


def trust_files(paths: Iterable[Union[str, Path]]) -> None:
    """Load exactly these files (or sharded checkpoint directories) with full unpickling from now on (``--trust-file``);
    CheckpointError, trusting nothing, for a path that does not exist or is a folder of another kind."""
    _TRUSTED.clear()
    _TRUSTED_DIRS.clear()
    files, dirs = set(), set()
    for given in paths:
        path = Path(given).expanduser()
        if not path.exists():
            raise CheckpointError(
                f"--trust-file '{given}' does not exist; name the checkpoint or weights file to trust (or a sharded checkpoint's *.dcp directory)"
            )
        if path.is_dir() and not is_sharded_checkpoint(path):
            raise CheckpointError(
                f"--trust-file '{given}' is a folder, not a sharded checkpoint directory (no .metadata), and trust covers no other folder's "
                "files; name the file to trust itself"
            )
        (dirs if path.is_dir() else files).add(path.resolve())
    _TRUSTED.update(files)
    _TRUSTED_DIRS.update(dirs)


def is_trusted(path: Union[str, Path]) -> bool:
    """Whether ``path`` (a file or a sharded checkpoint directory) was named with ``--trust-file``, or lies directly in a
    sharded checkpoint directory that was."""
    if not (_TRUSTED or _TRUSTED_DIRS):
        return False
    resolved = Path(path).expanduser().resolve()
    return resolved in _TRUSTED or resolved in _TRUSTED_DIRS or resolved.parent in _TRUSTED_DIRS


def refusal(path: Union[str, Path], asked: str, trust: Union[str, Path, None] = None) -> UnsafeFileError:
    """The one line for a file that asks for ``asked`` (a function or type outside the allowlist);
    ``trust``: what ``--trust-file`` should name (a sharded checkpoint's directory), default ``path``."""
    return UnsafeFileError(
        f"'{path}' asks to load {asked}, which checkpoints and weight files of this framework never hold, so it was not loaded "
        f"(loading never runs code); if you trust this file and where it came from, pass --trust-file {trust or path} "
        "to load it with full unpickling, which runs any code the file holds"
    )


_ASKED = (
    re.compile(r"GLOBAL (\S+) (?:was not an allowed global|whose module)"),
    re.compile(r"but got <class '([^']+)'>"),
    re.compile(r"but got <function ([^ >]+)"),
)


def asked_for(message: str, path: Union[str, Path, None] = None) -> Optional[str]:
    """The function or type a weights-only load refused, from torch's message (or, for a zip file, its pickle)."""
    for pattern in _ASKED:
        match = pattern.search(message)
        if match:
            return match.group(1)
    if path is not None:
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except LOAD_ERRORS:  # not a zip checkpoint: the message is all there is
            return None
        allowed = {name for entry in ALLOWED if isinstance(entry, tuple) for name in entry[1:]}
        unsafe = sorted(set(unsafe) - allowed)
        return ", ".join(unsafe) or None
    return None


def inner_message(message: str) -> str:
    """torch's own reason in a weights-only failure, without the advice it wraps it in."""
    text = message.split("WeightsUnpickler error:", 1)[-1].split("Check the documentation of torch.load", 1)[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else message.strip()


def weights_only_load(
    source: Any, name: Union[str, Path], map_location: Any = "cpu", trust: Union[str, Path, None] = None
) -> Any:
    """``torch.load(source, weights_only=True)`` with the allowlist; UnsafeFileError naming what a refused file asked for
    (``trust``: see ``refusal``). Other failures (a truncated or foreign file) propagate as torch raises them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*pickle protocol")  # a plain pickle: read as far as it is safe
        with torch.serialization.safe_globals(ALLOWED):
            try:
                return torch.load(source, map_location=map_location, weights_only=True)
            except pickle.UnpicklingError as err:
                asked = asked_for(str(err), name if isinstance(source, (str, Path)) else None)
                if asked is None:
                    raise pickle.UnpicklingError(inner_message(str(err))) from None
                raise refusal(name, asked, trust) from None


def load_torch(path: Union[str, Path]) -> Any:
    """A ``torch.save`` file on the CPU: weights-only with the allowlist, or fully when the user trusts it.

    CheckpointError for a corrupt or foreign file, UnsafeFileError for one that asks for more."""
    path = Path(path)
    try:
        if is_trusted(path):
            log.warning("loading '%s' with full unpickling (--trust-file): any code it holds runs", path)
            return torch.load(path, map_location="cpu", weights_only=False)
        return weights_only_load(path, path)
    except LOAD_ERRORS as err:
        if isinstance(err, CheckpointError):
            raise
        raise CheckpointError(
            f"checkpoint '{path}' is corrupt or not a PyTorch file ({type(err).__name__}: {one_line_reason(err)})"
        ) from err


def one_line_reason(err: BaseException) -> str:
    """The first line of an exception's message (torch's zip reader writes several)."""
    text = str(err).strip()
    return text.splitlines()[0] if text else "no detail"
