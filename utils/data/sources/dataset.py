"""What every dataset that reads through a source (``source.py``) shares, written once: the arguments a resume
may change, the check made before a run folder, the training order the source reads best in, and (for a
dataset whose items are the source's samples) the length and the keys."""

from __future__ import annotations

from typing import List, Optional

from torch.utils.data import Dataset

from utils.data.samplers import WindowOrder
from utils.data.sources.pack import PACK_INERT, check_folders
from utils.data.sources.source import Source
from utils.data.string_table import StringTable


class ReadsSource:
    """A dataset that reads ``self.source``."""

    INERT_ARGS = PACK_INERT  # data.args a resume may change (utils/checkpoint/guard.py)
    check_folders = staticmethod(check_folders)  # a remote pack's cache folder, checked before a run folder is made
    source: Source

    def window_order(self) -> Optional[WindowOrder]:
        """The source's training order (a pack's shard windows, ``data.args.shuffle_window``); None: a shuffle of
        the split."""
        return self.source.window_order()


class SourceDataset(ReadsSource, Dataset):
    """A dataset whose items are its source's samples, one each."""

    def __len__(self) -> int:
        return len(self.source)

    def key_table(self) -> StringTable:
        """Each sample's path relative to the split (``source.py``): the data's identity, whatever the root."""
        return self.source.keys

    def sample_keys(self) -> List[str]:
        """The keys as a list."""
        return self.source.keys.tolist()
