"""The reader interface the folder datasets read through: one split's samples, wherever their bytes lie.

A source gives ``keys`` (a ``StringTable`` of each sample's path relative to the split: the data's identity,
whatever the root), ``labels`` (class indices; -1 for image and mask pairs), ``classes`` (names, or None),
``where`` (the split as errors name it), ``len()``, ``name_of(i)`` (a sample as errors and predictions name
it), ``file(i)`` (its local file, None where it has none), ``members(i)`` (its members as stored, each a file or
bytes: what ``--mode pack`` copies) and ``window_order()`` (the training order it reads best in; None: any).
Each task's sources add how a sample decodes, as its files read (the same values from a folder and its pack):

- classification: ``image(i, channels)``, ``image_bytes(i)`` (a JPEG decoded at its crop), ``in_memory``;
- sod: ``pair(i, channels)``, ``stems()``, ``stem_names()``;
- video (a sample is a video): ``frame_counts``, ``names()``, ``frames(i, indices)``.

``open.py`` opens the one ``data.root`` names; a new kind of source is one file beside it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional, Union

import numpy as np

from utils.data.samplers import WindowOrder
from utils.data.shards.sources import Member
from utils.data.string_table import StringTable


def ext_of(path: Union[str, Path]) -> str:
    """A member's extension as a pack stores it: the file's suffix, lower case, without the dot."""
    return Path(path).suffix.lower().lstrip(".") or "bin"


class Source:
    """One split's samples (see the module doc); the parts every kind of source shares."""

    where: str = ""
    keys: StringTable
    labels: np.ndarray
    classes: Optional[List[Any]] = None
    in_memory = False  # an in-memory dataset's tensors, as it gave them (a pack of digits)
    origin: Optional[str] = None  # the dataset a pack was written from; None for files

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def num_classes(self) -> int:
        """The classes the labels span: the class names', where there are names."""
        return len(self.classes) if self.classes is not None else 0

    def name_of(self, at: int) -> str:
        """Sample ``at`` as errors and predictions name it."""
        raise NotImplementedError

    def file(self, at: int) -> Optional[str]:
        """The local file that holds sample ``at`` (its image); None where it lies in no file of its own."""
        return None

    def members(self, at: int) -> List[Member]:
        """Sample ``at``'s members in order (an image; an image and its mask; a video's frames), as stored."""
        raise NotImplementedError

    def window_order(self) -> Optional[WindowOrder]:
        """The training order this source reads best in; None: a shuffle of the split."""
        return None
