"""Byte sizes as users write them: ``67108864``, ``"64MB"``, ``"2GiB"``."""

from __future__ import annotations

import re
from typing import Union

from utils.errors import ConfigError

UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
UNITS.update({"KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40})
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(value: Union[int, str], key: str) -> int:
    """``value`` in bytes; a ConfigError naming ``key`` for anything else than a positive size."""
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be a size in bytes or like '64MB', got {value!r}")
    if isinstance(value, int):
        number, unit = float(value), ""
    else:
        match = _SIZE.match(str(value))
        if not match or match.group(2).upper() not in UNITS:
            raise ConfigError(f"{key} must be a size in bytes or like '64MB' or '2GiB', got {value!r}")
        number, unit = float(match.group(1)), match.group(2).upper()
    size = int(number * UNITS[unit])
    if size < 1:
        raise ConfigError(f"{key} must be a positive size, got {value!r}")
    return size
