"""Videos extracted to frames: ``<class>/<video>/<frame>.jpg`` (UCF101, Kinetics, HMDB51 dumps), or a pack of
them, read through a source (``utils/data/sources/video_folders.py`` for the folder layout: split folders, or
split files such as UCF101's lists).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import torch

from utils.config.arguments import Count
from utils.data.clips import ClipDataset
from utils.data.samplers import WindowOrder
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.dataset import ReadsSource
from utils.data.sources.open import changed, open_source
from utils.data.sources.pack import PackArgs
from utils.data.sources.video_folders import VideoFolders
from utils.errors import ConfigError
from utils.registry import DATASETS


@DATASETS.register("video_frames_folder")
class VideoFramesFolder(ReadsSource, ClipDataset):
    """Clips of ``clip_len`` frames, ``frame_stride`` apart, from frame folders (see the module doc)."""

    task = "video"  # the eval.metric its samples are for (utils/data/input_shape.py: check_task)

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        split_files: Optional[Dict[str, str]] = None,
        classes: Optional[List[str]] = None,
        clip_len: Count = 16,
        frame_stride: Count = 1,
        num_clips: Count = 3,
        pad_short: bool = False,
        cache_limit: Union[int, str] = DEFAULT_CACHE_LIMIT,
        cache_dir: Optional[str] = None,
        shuffle_window: Optional[Count] = None,
    ) -> None:
        super().__init__(split, transform, clip_len, frame_stride, num_clips, pad_short)
        if root is None:
            raise ConfigError("dataset video_frames_folder needs data.root=<folder of <class>/<video>/<frame>.jpg>")
        pack = PackArgs(cache_limit, cache_dir, shuffle_window)
        files = partial(VideoFolders, Path(root), split, split_files, classes)
        placed = changed(VideoFramesFolder.__init__, split_files=split_files)
        source = self.source = open_source(root, split, self.task, pack, files, "video_frames_folder", classes, placed)
        self.classes, self.num_classes = source.classes, source.num_classes
        self.set_videos(source.labels, source.frame_counts, source.names(), source.keys)  # type: ignore[attr-defined]

    def folder(self, video: int) -> Path:
        """The frame folder of video ``video`` (its name)."""
        return Path(self.names[video])

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        return self.source.frames(video, indices)  # type: ignore[attr-defined]

    def window_order(self) -> Optional[WindowOrder]:
        """The source's training order (a pack's shard windows, ``data.args.shuffle_window``; an item is a video);
        None in evaluation, and for files."""
        return self.source.window_order() if self.training else None
