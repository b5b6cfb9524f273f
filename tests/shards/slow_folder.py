"""A test-only ``image_folder`` whose files take ``data.args.delay`` seconds each to reach (as on a slow network
file system), so that a pack of a few dozen files lasts long enough to be killed part-way. The delay is not in
what pack writes (``index.json`` names the dataset, not its arguments): any delay packs the same bytes."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Sequence

from utils.data.datasets.image_folder import ImageFolder
from utils.registry import DATASETS


@DATASETS.register("slow_folder")
class SlowFolder(ImageFolder):
    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        classes: Optional[Sequence[str]] = None,
        delay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(split, root, transform, classes=classes, **kwargs)
        self.delay = delay
        # pack reads each sample's files through the dataset's source (utils/data/shards/sources.py): the delay goes
        # there (on the dataset's own path() it no longer slowed a pack, and the kill tests raced the split's end)
        members = self.source.members

        def slow_members(at: int) -> Any:
            time.sleep(self.delay)
            return members(at)

        self.source.members = slow_members
