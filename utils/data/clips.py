"""Clip sampling shared by the video datasets.

A video dataset gives, per video, a label, a frame count and a way to read
frames; this base turns that into clips ``[C, T, H, W]``. Training takes one
clip per video at a random start (temporal jitter); evaluation takes
``num_clips`` uniformly spaced clips per video, each one item whose target
carries the video index, so a metric can average clip scores per video.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import Dataset

from utils.data.string_table import StringTable
from utils.errors import ConfigError, DataError


def clip_span(clip_len: int, frame_stride: int) -> int:
    """Frames a clip covers from its first to its last frame."""
    return (clip_len - 1) * frame_stride + 1


def eval_starts(num_frames: int, span: int, num_clips: int) -> List[int]:
    """``num_clips`` start frames, the centres of equal segments of the valid start range."""
    max_start = max(num_frames - span, 0)
    return [((2 * k + 1) * max_start) // (2 * num_clips) for k in range(num_clips)]


def clip_indices(start: int, clip_len: int, frame_stride: int, num_frames: int) -> List[int]:
    """Frame indices of one clip; past the end (short videos with padding) the last frame repeats."""
    return [min(start + i * frame_stride, num_frames - 1) for i in range(clip_len)]


class ClipDataset(Dataset):
    """Items ``(clip [C, T, H, W] float32, {"label": int, "video": int})``.

    Subclasses call ``set_videos`` and implement ``read_frames(video, indices)``
    returning frames ``[T, C, H, W]``, uint8 or float in [0, 1]. The videos' labels and frame counts
    are arrays, their names and keys string tables (``utils/data/string_table.py``), which loader
    workers share. The transform sees the clip as a
    ``tv_tensors.Video`` in [0, 1], so torchvision.transforms.v2 draws its random
    parameters once and applies them to every frame alike.
    """

    def __init__(
        self,
        split: str,
        transform: Optional[Callable],
        clip_len: int,
        frame_stride: int,
        num_clips: int,
        pad_short: bool,
    ) -> None:
        for name, value in (("clip_len", clip_len), ("frame_stride", frame_stride), ("num_clips", num_clips)):
            if value < 1:
                raise ConfigError(f"data.args.{name} must be >= 1, got {value}")
        self.split = split
        self.training = split == "train"
        self.transform = transform
        self.clip_len = clip_len
        self.frame_stride = frame_stride
        self.num_clips = num_clips
        self.pad_short = pad_short
        from torchvision.transforms import v2  # here, not at import: torchvision costs about 1 s to import

        self.to_float = v2.ToDtype(torch.float32, scale=True)
        self.labels = np.zeros(0, dtype=np.int64)
        self.frame_counts = np.zeros(0, dtype=np.int64)
        self.names = self.keys = StringTable.from_strings([])

    def set_videos(
        self,
        labels: Sequence[int],
        frame_counts: Sequence[int],
        names: Sequence[str],
        keys: Optional[Sequence[str]] = None,
    ) -> None:
        """Register the videos; a video without frames, or shorter than a clip, is an error naming it.
        ``keys``: names that do not depend on where the data lies (``sample_keys``); ``names`` by default."""
        span = clip_span(self.clip_len, self.frame_stride)
        counts = np.asarray(frame_counts, dtype=np.int64).reshape(-1)
        unusable = np.flatnonzero((counts == 0) | ((counts < span) & (not self.pad_short)))
        if len(unusable):  # the first, as the videos are listed
            name, count = names[unusable[0]], int(counts[unusable[0]])
            if count == 0:
                raise DataError(f"video '{name}' has no frames; extract its frames again or remove the folder")
            raise DataError(
                f"video '{name}' has {count} frames, but a clip spans {span} "
                f"(clip_len={self.clip_len}, frame_stride={self.frame_stride}); lower data.args.clip_len or "
                "data.args.frame_stride, set data.args.pad_short=true to repeat its last frame, or remove the video"
            )
        self.labels, self.frame_counts = np.asarray(labels, dtype=np.int64).reshape(-1), counts
        self.names = _table(names)
        self.keys = _table(keys) if keys is not None else self.names

    @property
    def num_videos(self) -> int:
        return len(self.labels)

    def key_table(self) -> StringTable:
        """Item keys: the video's key, with the clip's number in evaluation (``utils/data/identity.py``)."""
        if self.training:
            return self.keys
        return StringTable.from_strings(f"{key}#{k}" for key in self.keys for k in range(self.num_clips))

    def sample_keys(self) -> List[str]:
        """The keys as a list."""
        return self.key_table().tolist()

    def __len__(self) -> int:
        return self.num_videos if self.training else self.num_videos * self.num_clips

    def locate(self, index: int) -> Tuple[int, int]:
        """``(video, start frame)`` of item ``index``: random start in training, the k-th uniform one otherwise."""
        span = clip_span(self.clip_len, self.frame_stride)
        if self.training:
            video = index
            max_start = max(int(self.frame_counts[video]) - span, 0)
            return video, int(torch.randint(max_start + 1, ()).item())
        video, k = divmod(index, self.num_clips)
        return video, eval_starts(int(self.frame_counts[video]), span, self.num_clips)[k]

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        raise NotImplementedError

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, Dict[str, int]]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} is outside a dataset of {len(self)} clips")
        video, start = self.locate(index)
        indices = clip_indices(start, self.clip_len, self.frame_stride, int(self.frame_counts[video]))
        from torchvision import tv_tensors

        clip = self.to_float(tv_tensors.Video(self.read_frames(video, indices)))
        if self.transform is not None:
            clip = self.transform(clip)
        clip = clip.as_subclass(torch.Tensor).permute(1, 0, 2, 3).contiguous()  # [T, C, H, W] -> [C, T, H, W]
        return clip, {"label": int(self.labels[video]), "video": video}


def _table(strings: Sequence[str]) -> StringTable:
    return strings if isinstance(strings, StringTable) else StringTable.from_strings(strings)
