"""What ``--mode predict --input PATH`` reads for a video network: videos as folders of frames.

A video is a folder that holds frame images (the layout ``video_frames_folder`` trains
on: ``<video>/<frame>.jpg``, frames in natural order). PATH is one such folder, a folder
searched recursively for them, or a glob matching them. Each video is cut into the
checkpoint's evaluation clips (``data.args.clip_len``, ``frame_stride``, ``num_clips``,
``pad_short``), exactly as ``--mode test`` cuts its split. Video files are refused with the
command that extracts their frames.
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import torch

from utils.data.clips import ClipDataset
from utils.data.datasets.video_frames_folder import EXTENSIONS, list_frames, read_clip
from utils.data.folders import walk_visible
from utils.data.predict_inputs import VIDEO_EXTENSIONS
from utils.errors import DataError


def _holds_frames(folder: Path) -> bool:
    return folder.is_dir() and bool(list_frames(folder))


def collect_videos(spec: Optional[str]) -> List[Path]:
    """The frame folders ``spec`` names, sorted; DataError when there are none or a video file is given."""
    if not spec:
        raise DataError("--mode predict needs --input PATH (a folder of frame folders, one frame folder, or a glob such as 'videos/*')")
    path = Path(spec).expanduser()
    if path.is_file() or (not path.exists() and Path(spec).suffix.lower() in VIDEO_EXTENSIONS):
        raise DataError(f"--input '{spec}' is a file; a video network predicts folders of frames: extract them first "
                        f"(ffmpeg -i '{spec}' '{Path(spec).with_suffix('')}/%05d.jpg') and give that folder")
    if path.is_dir():
        found = [path] if _holds_frames(path) else [Path(d) for d, _, files in walk_visible(path) if any(f.lower().endswith(EXTENSIONS) for f in files)]
    else:
        found = [Path(p) for p in glob.glob(str(path), recursive=True) if _holds_frames(Path(p))]
    if not found:
        raise DataError(f"--input '{spec}' holds no folders of frames (a video is a folder of {', '.join(EXTENSIONS)} frames)")
    return sorted(found)


class PredictVideos(ClipDataset):
    """The evaluation clips of each frame folder; items ``(clip [C, T, H, W], {"label": 0, "video": v})``."""

    def __init__(self, folders: Sequence[Path], transform: Optional[Callable], clip_len: int, frame_stride: int, num_clips: int, pad_short: bool) -> None:
        super().__init__("predict", transform, clip_len, frame_stride, num_clips, pad_short)
        self.paths = list(folders)
        self.set_videos([0] * len(self.paths), [len(list_frames(f)) for f in self.paths], [str(f) for f in self.paths])

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        return read_clip(self.paths[video], indices)
