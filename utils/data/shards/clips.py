"""Packed frame folders: the clips of ``utils/data/clips.py`` read from shards."""

from __future__ import annotations

from typing import Callable, List, Optional

import torch

from utils.data.clips import ClipDataset
from utils.data.images import as_float
from utils.data.shards import decode
from utils.data.shards.reader import ShardReader


def video_names(reader: ShardReader) -> List[str]:
    """Each packed video as errors and predictions name it: ``<split url>:<video name>``."""
    return [f"{reader.where}:{sample['key']}" for sample in reader.index.samples]


def read_frames(reader: ShardReader, video: int, indices: List[int]) -> torch.Tensor:
    """Frames ``indices`` of packed video ``video`` as ``read_clip`` reads them from its folder: ``[T, 3, H, W]`` float;
    each frame read once however often the clip repeats it."""
    frames = reader.index.samples[video]["frames"]
    wanted = [frames[i] for i in indices]
    data = reader.members(video, sorted(set(wanted)))
    where = f"{reader.where}:{reader.index.samples[video]['key']}"
    return torch.stack([as_float(decode.pixels(data[name], name, f"{where}/{name}", 3)) for name in wanted])


class ShardClips(ClipDataset):
    """Clips as ``video_frames_folder`` gives them (the same starts, frames and transforms), frames read by byte range."""

    def __init__(self, reader: ShardReader, transform: Optional[Callable], clip: dict) -> None:
        super().__init__(reader.index.split, transform, **clip)
        self.reader = reader
        samples = reader.index.samples
        self.set_videos(
            [s["label"] for s in samples],
            [len(s["frames"]) for s in samples],
            video_names(reader),
            [s["key"] for s in samples],
        )

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        return read_frames(self.reader, video, indices)
