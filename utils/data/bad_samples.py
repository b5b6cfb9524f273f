"""``data.args.on_bad_sample``: what a dataset does with a sample whose file cannot be used.

``stop`` (the default) ends the run with one line naming the file; ``skip`` warns once
per file and returns the next usable sample instead. Every dataset that reads files
shares this (``image_folder``, ``image_mask_folder``): a reader raises :class:`BadFile`
and :class:`BadSamples` decides.
"""

from __future__ import annotations

import logging
from typing import Callable, Set, TypeVar

from utils.errors import ConfigError, DataError

log = logging.getLogger(__name__)

POLICIES = ("stop", "skip")
T = TypeVar("T")


class BadFile(DataError):
    """One sample's file cannot be used as it is (unreadable, or values that no rule reads).

    The message names the file and ends with its fix; ``skipped`` is the text of the
    warning when ``on_bad_sample=skip`` skips it. One positional argument, so a
    DataLoader worker can re-raise it as it is.
    """

    def __init__(self, message: str, skipped: str = "") -> None:
        super().__init__(message)
        self.skipped = skipped or message


class BadSamples:
    """Applies the ``on_bad_sample`` policy of the dataset named ``dataset``; remembers skipped indices."""

    def __init__(self, policy: str, dataset: str) -> None:
        if policy not in POLICIES:
            raise ConfigError(f"{dataset}: data.args.on_bad_sample must be 'stop' or 'skip', got '{policy}'")
        self.policy = policy
        self.bad: Set[int] = set()  # per process: each DataLoader worker keeps its own

    def first_usable(self, index: int, count: int, read: Callable[[int], T], where: str) -> T:
        """``read(index)``; under ``skip`` the next index (cyclically) whose files can be used."""
        if not -count <= index < count:
            raise IndexError(f"index {index} is outside a dataset of {count} samples")  # ends iteration by index
        for offset in range(count):
            at = (index + offset) % count
            if at in self.bad:
                continue
            try:
                return read(at)
            except BadFile as err:
                if self.policy == "stop":
                    raise DataError(f"{err}, or set data.args.on_bad_sample=skip") from err
                self.bad.add(at)
                log.warning("skipping %s; data.args.on_bad_sample=skip", err.skipped)
        raise DataError(f"no usable sample in '{where}': every file was skipped (see the warnings above)")
