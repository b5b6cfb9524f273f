"""The SHA-256 of a file, read in 1 MiB blocks: checkpoints and packed shards are checked by it."""

from __future__ import annotations

import hashlib
from pathlib import Path


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks (to verify a file, never to write one)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
