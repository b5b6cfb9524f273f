"""Glob patterns over full parameter names (``backbone.*``), as ``model.freeze`` and ``optim.param_groups`` use them."""

from __future__ import annotations

import fnmatch
from typing import Iterable, Sequence

from utils.errors import ConfigError


def matches(name: str, patterns: Iterable[str]) -> bool:
    """Whether ``name`` matches any of ``patterns`` (``*`` also matches dots)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def check_patterns(names: Sequence[str], patterns: Iterable[str], key: str) -> None:
    """ConfigError naming config ``key``'s first pattern that matches no name: it is almost always a typo."""
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            raise ConfigError(
                f"{key} pattern '{pattern}' matches no parameter; patterns are globs over full "
                f"parameter names (e.g. 'backbone.*'); some names: {', '.join(names[:3])}"
            )
