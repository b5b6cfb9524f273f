"""N strings in two numpy arrays, so that forked loader workers share them instead of copying them.

A list of a million Python strings is a million objects whose reference counts every forked
DataLoader worker writes as it reads them, copying their pages into each worker (pytorch issue
13246). Here the strings are one ``uint8`` buffer, each string's UTF-8 bytes followed by ``"\\n"``,
and an ``int64`` array of where each starts: two objects, whatever the count. The buffer is
exactly the bytes the data's fingerprint hashes (``utils/data/identity.py``: SHA-256 over each key
and ``"\\n"``), so the fingerprint is one call over it.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Iterable, Iterator, List, Optional

import numpy as np

ENCODING, ERRORS = "utf-8", "surrogateescape"  # as os gives file names: undecodable bytes kept as they are
CHUNK = 65536  # strings encoded or decoded per call


class StringTable:
    """``table[i]`` is string ``i``; ``len``, iteration (decoded ``CHUNK`` strings at a time), ``sha256()``."""

    def __init__(
        self,
        buffer: np.ndarray,
        offsets: np.ndarray,
        end: Optional[int] = None,
        plain: Optional[bool] = None,
        digest: Optional[str] = None,
    ) -> None:
        """``buffer``: the strings' bytes, each followed by ``"\\n"``; ``offsets``: ``N + 1`` positions, string
        ``i`` is ``buffer[offsets[i] : offsets[i + 1] - 1]``; or, with ``end``, the ``N`` starts alone (a packed
        index's mapped column, read in place rather than copied with one more number) and the last string ends
        before ``end``. ``plain``: whether no string holds ``"\\n"``, when the caller knows (a checked index);
        else one pass over the buffer finds out. ``digest``: ``sha256()`` when the caller knows it (a checked
        index's stamp keeps it), else one pass over the buffer when it is asked."""
        self.buffer = buffer
        self._starts = offsets if end is not None else offsets[:-1]
        self._end = int(end) if end is not None else int(offsets[-1]) if len(offsets) else 0
        self._offsets = None if end is not None else offsets
        # no string holds "\n" itself: a block of strings decodes in one call and splits at the separators
        self._plain = int(np.count_nonzero(buffer == 10)) == len(self._starts) if plain is None else plain
        self._digest = digest

    @property
    def offsets(self) -> np.ndarray:
        """The ``N + 1`` positions (``int64``); made on first use for a table given its starts alone."""
        if self._offsets is None:
            self._offsets = np.append(self._starts.astype(np.int64), self._end)
        return self._offsets

    def _stops(self, at: np.ndarray) -> np.ndarray:
        """Where each string ``at`` (valid, non-negative indices) ends, its ``"\\n"`` included."""
        after = np.minimum(at + 1, len(self._starts) - 1)
        return np.where(at + 1 < len(self._starts), self._starts[after].astype(np.int64), self._end)

    @classmethod
    def from_strings(cls, strings: Iterable[str]) -> "StringTable":
        """The table of ``strings`` (any iterable: a generator is consumed ``CHUNK`` strings at a time)."""
        data, ends = bytearray(), [np.zeros(1, dtype=np.int64)]
        it = iter(strings)
        for part in iter(lambda: list(itertools.islice(it, CHUNK)), []):
            block = ("\n".join(part) + "\n").encode(ENCODING, ERRORS)
            stops = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10) + 1
            if len(stops) != len(part):  # some string holds "\n": its own length
                stops = np.cumsum([len(s.encode(ENCODING, ERRORS)) + 1 for s in part], dtype=np.int64)
            ends.append(stops.astype(np.int64) + len(data))
            data += block
        buffer = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, dtype=np.uint8)
        return cls(buffer, np.concatenate(ends))

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, index: int) -> str:
        n = len(self)
        i = int(index)
        if not -n <= i < n:
            raise IndexError(f"index {index} is outside a table of {n} strings")
        i %= n
        start, stop = int(self._starts[i]), (int(self._starts[i + 1]) if i + 1 < n else self._end) - 1
        return self.buffer[start:stop].tobytes().decode(ENCODING, ERRORS)

    def take(self, indices: np.ndarray) -> List[str]:
        """Strings ``indices`` (a step's samples): their bytes gathered and decoded in one call each."""
        at = np.asarray(indices, dtype=np.int64)
        if not self._plain or not len(at):
            return [self[i] for i in at.tolist()]
        if at.min() < -len(self) or at.max() >= len(self):
            raise IndexError(f"an index of {at.min()}..{at.max()} is outside a table of {len(self)} strings")
        at %= max(len(self), 1)
        starts = self._starts[at].astype(np.int64)
        lengths = self._stops(at) - starts  # each with its "\n"
        ends = np.cumsum(lengths)
        picked = self.buffer[np.repeat(starts - (ends - lengths), lengths) + np.arange(ends[-1])]
        return picked.tobytes().decode(ENCODING, ERRORS).split("\n")[:-1]

    def chunks(self, size: int = CHUNK) -> Iterator[List[str]]:
        """The strings in order, ``size`` at a time."""
        for first in range(0, len(self), size):
            last = min(first + size, len(self))
            if not self._plain:
                yield [self[i] for i in range(first, last)]
                continue
            stop = int(self._starts[last]) if last < len(self) else self._end
            block = self.buffer[int(self._starts[first]) : stop].tobytes().decode(ENCODING, ERRORS)
            yield block.split("\n")[:-1]

    def __iter__(self) -> Iterator[str]:
        for part in self.chunks():
            yield from part

    def tolist(self) -> List[str]:
        """Every string in a list (what a caller that needs a list asks for; a million strings cost about 100 MB)."""
        return list(self)

    def sha256(self) -> str:
        """SHA-256 (hex) of each string's UTF-8 bytes followed by ``"\\n"``, in order: one call over the buffer."""
        return self._digest or hashlib.sha256(self.buffer).hexdigest()

    @property
    def nbytes(self) -> int:
        """Bytes the table holds."""
        return self.buffer.nbytes + (self._offsets if self._offsets is not None else self._starts).nbytes
