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
    return [f"{reader.where}:{reader.index.key(at)}" for at in range(len(reader.index))]


def read_frames(reader: ShardReader, video: int, indices: List[int]) -> torch.Tensor:
    """Frames ``indices`` of packed video ``video`` as ``read_clip`` reads them from its folder: ``[T, 3, H, W]`` float;
    each frame read once however often the clip repeats it."""
    wanted = sorted(set(indices))
    data = dict(zip(wanted, reader.members(video, wanted)))
    spans, where = reader.index.spans(video), f"{reader.where}:{reader.index.key(video)}"
    ext = [reader.index.ext(spans[i]) for i in wanted]
    frames = {i: as_float(decode.pixels(data[i], e, f"{where}/frame {i}", 3)) for i, e in zip(wanted, ext)}
    return torch.stack([frames[i] for i in indices])


class ShardClips(ClipDataset):
    """Clips as ``video_frames_folder`` gives them (the same starts, frames and transforms), frames read by byte range."""

    def __init__(self, reader: ShardReader, transform: Optional[Callable], clip: dict) -> None:
        super().__init__(reader.index.split, transform, **clip)
        self.reader = reader
        index = reader.index
        self.set_videos(
            index.samples["label"].tolist(),
            index.samples["count"].tolist(),
            video_names(reader),
            [index.key(at) for at in range(len(index))],
        )

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        return read_frames(self.reader, video, indices)
