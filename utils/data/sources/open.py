"""``open_source``: the source ``data.root`` names for a split, the one place that tells a pack from a folder
of files, as timm's ``create_reader`` picks a reader under one dataset. The datasets read what it gives
(``source.py``) and never ask which kind it is.

Arguments that only one kind reads say once, when set, that they do nothing with the other: a pack's reading
(``cache_limit``, ``cache_dir``, ``shuffle_window``) with a folder of files, and a folder's layout
(``splits``, ``image_dir``, ``split_files``, ...) with a pack.
"""

from __future__ import annotations

import functools
import inspect
import logging
from typing import Any, Callable, Dict, Optional, Sequence

from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.pack import PackArgs, is_packed, open_pack
from utils.data.sources.source import Source

log = logging.getLogger(__name__)
READER_DEFAULTS = {"cache_limit": DEFAULT_CACHE_LIMIT, "cache_dir": None, "shuffle_window": None}


def open_source(
    root: str,
    split: str,
    task: str,
    args: PackArgs,
    folder: Callable[[], Source],
    dataset: str,
    classes: Optional[Sequence[Any]] = None,
    placed: Optional[Dict[str, Any]] = None,
) -> Source:
    """``root``'s ``split`` for ``dataset`` (which reads ``task`` data): the pack reader when ``root`` is a pack
    (S3, or a folder whose ``<split>`` holds an index; its classes must be ``classes`` when given), else
    ``folder()``, the dataset's own layout of files. ``placed``: the dataset's layout arguments set to other
    than their defaults (``changed``), which a pack warns do nothing."""
    if is_packed(root, split):
        pack = open_pack(root, split, task, args, dataset)
        for name, value in (placed or {}).items():
            warn_once(f"data.args.{name}={value!r} does nothing: data.root is a pack, '{pack.where}'")
        pack.check_classes(classes)
        return pack
    for name, value in args._asdict().items():
        if value != READER_DEFAULTS[name]:
            warn_once(f"data.args.{name}={value!r} does nothing: data.root '{root}' is a folder of files, not a pack")
    return folder()


def changed(init: Callable[..., Any], **given: Any) -> Dict[str, Any]:
    """Those of ``given`` (arguments of ``init``) set to other than their defaults."""
    defaults = inspect.signature(init).parameters
    return {name: value for name, value in given.items() if value != defaults[name].default}


@functools.lru_cache(maxsize=None)
def warn_once(message: str) -> None:
    """``message`` as a warning, once per process (each split, and each loader worker, opens its source again)."""
    log.warning(message)
