"""A test-only packed ``image_folder`` that kill -9s its job at a reproducible read (``REGTRAIN_KILL_AT``).

Loaded with ``custom_imports=[tests.shards.killing_shards]`` and ``data.name=killing_shards``: rank 0
SIGKILLs its whole process group (the launcher and every rank) when it is about to read its N-th
training sample. An environment variable, not a config key: the resume guard compares ``data.args``.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from utils.data.datasets.image_folder import ImageFolder
from utils.distributed.ops import get_rank
from utils.registry import DATASETS


@DATASETS.register("killing_shards")
class KillingShards(ImageFolder):
    def __init__(self, split: str = "train", **kwargs: Any) -> None:
        super().__init__(split, **kwargs)  # data.root: a pack of classification data
        self.counting, self.reads = split == "train", 0

    def __getitem__(self, index: int) -> Any:
        if self.counting:
            self.reads += 1
            kill_at = int(os.environ.get("REGTRAIN_KILL_AT", "0"))
            if kill_at and self.reads >= kill_at and get_rank() == 0:
                os.killpg(os.getpgid(0), signal.SIGKILL)
        return super().__getitem__(index)
