"""Sources whose samples are files on disk, named by ``name_of``: what reading one image file, or one folder of a
video's frames, takes, written once for the training folders (``class_folders.py``, ``video_folders.py``) and the
inputs of predict (``utils/data/predict_inputs.py``, ``utils/data/predict_videos.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch

from utils.data.frames import list_frames, read_clip
from utils.data.images import file_bytes, read_pixels
from utils.data.sources.source import Member, Source, ext_of


class ImageFileSource(Source):
    """Sample ``at`` is the image file ``name_of(at)``, read as stored."""

    def file(self, at: int) -> Optional[str]:
        return self.name_of(at)

    def image(self, at: int, channels: int) -> torch.Tensor:
        """Sample ``at``'s image as stored (``read_pixels``)."""
        return read_pixels(self.name_of(at), channels)

    def image_bytes(self, at: int) -> Tuple[bytes, str]:
        """Sample ``at``'s file as stored, and its extension (for a reader that decodes them at the size it needs:
        ``utils/data/crop_decode.py``)."""
        path = self.name_of(at)
        return file_bytes(path, f"image '{path}'", "fix or remove the file"), ext_of(path)

    def members(self, at: int) -> List[Member]:
        path = self.name_of(at)
        return [(ext_of(path), Path(path))]


class FrameFolderSource(Source):
    """Sample ``at`` is a video, the folder of frames ``name_of(at)`` (``utils/data/frames.py``)."""

    frame_counts: np.ndarray

    def frames(self, video: int, indices: List[int]) -> torch.Tensor:
        """Frames ``indices`` of video ``video`` (``read_clip``)."""
        return read_clip(Path(self.name_of(video)), indices)

    def members(self, at: int) -> List[Member]:
        folder = Path(self.name_of(at))
        return [(ext_of(name), folder / name) for name in list_frames(folder)]


def frame_counts(folders: Sequence[Path]) -> np.ndarray:
    """How many frames each of ``folders`` holds."""
    return np.asarray([len(list_frames(folder)) for folder in folders], np.int64)
