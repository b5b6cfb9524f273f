"""Packed frame folders: the clips of ``utils/data/clips.py`` read from shards."""

from __future__ import annotations

from typing import Callable, List, Optional

import torch

from utils.data.clips import ClipDataset
from utils.data.images import as_float
from utils.data.shards import decode
from utils.data.shards.reader import ShardReader


class ShardClips(ClipDataset):
    """Clips as ``video_frames_folder`` gives them (the same starts, frames and transforms), frames read by byte range."""

    def __init__(self, reader: ShardReader, where: str, transform: Optional[Callable], clip: dict) -> None:
        super().__init__(reader.index.split, transform, **clip)
        self.reader, self.where = reader, where
        samples = reader.index.samples
        names = [f"{where}:{s['name']}" for s in samples]
        self.set_videos(
            [s["label"] for s in samples], [len(s["frames"]) for s in samples], names, [s["key"] for s in samples]
        )

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        frames = self.reader.index.samples[video]["frames"]
        wanted = [frames[i] for i in indices]
        data = self.reader.members(video, sorted(set(wanted)))
        where = self.names[video]
        return torch.stack([as_float(decode.pixels(data[name], name, f"{where}/{name}", 3)) for name in wanted])
