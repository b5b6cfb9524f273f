"""A test-only dataset whose folder depends on the rank: ``data.root`` with ``{rank}`` in it.

Distributed tests load it with ``custom_imports=[tests.distributed.rank_data]`` to give one
rank a missing data folder while the others find theirs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from utils.data.datasets.image_folder import ImageFolder
from utils.distributed.ops import get_rank
from utils.registry import DATASETS


@DATASETS.register("rank_image_folder")
class RankImageFolder(ImageFolder):
    """``image_folder`` reading ``data.root`` formatted with this process's rank.

    A rank whose folder is missing looks for ``missing_after_s`` seconds first (as on a slow
    network file system), so its peers are already waiting in a collective when it fails.
    """

    def __init__(self, split: str = "train", root: Optional[str] = None, missing_after_s: float = 0.0, **kwargs: Any) -> None:
        root = root.format(rank=get_rank()) if root else root
        if root and not Path(root).is_dir():
            time.sleep(missing_after_s)
        super().__init__(split, root, **kwargs)
