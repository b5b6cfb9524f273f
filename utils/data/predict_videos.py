"""What ``--mode predict --input PATH`` reads for a video network: videos as folders of frames.

A video is a folder that holds frame images (the layout ``video_frames_folder`` trains
on: ``<video>/<frame>.jpg``, frames in natural order). PATH is one such folder, a folder
searched recursively for them, or a glob matching them. Each video is cut into the
checkpoint's evaluation clips (``data.args.clip_len``, ``frame_stride``, ``num_clips``,
``pad_short``), exactly as ``--mode test`` cuts its split; every clip must reach the network at the
height x width it was trained at (``Sizing``). A clip with an unreadable frame follows
``data.args.on_bad_sample`` (``skip``: the video's other clips are averaged; a video without a
readable clip gets no row). Video files are refused with the command that extracts their frames.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch.utils.data import default_collate

from utils.data.bad_samples import BadFile, BadSamples
from utils.data.clips import ClipDataset
from utils.data.folders import glob_visible, walk_visible
from utils.data.frames import EXTENSIONS, list_frames
from utils.data.predict_inputs import VIDEO_EXTENSIONS, Sizing
from utils.data.sources.files import FrameFolderSource, frame_counts
from utils.data.sources.source import Source
from utils.data.string_table import StringTable
from utils.errors import DataError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ClipArgs:
    """How the training dataset cut a video into evaluation clips (``data.args``)."""

    clip_len: int
    frame_stride: int
    num_clips: int
    pad_short: bool


def _holds_frames(folder: Path) -> bool:
    return folder.is_dir() and bool(list_frames(folder))


def collect_videos(spec: Optional[str]) -> List[Path]:
    """The frame folders ``spec`` names, sorted; DataError when there are none or a video file is given."""
    if not spec:
        raise DataError(
            "--mode predict needs --input PATH (a folder of frame folders, one frame folder, or a glob such as 'videos/*')"
        )
    path = Path(spec).expanduser()
    if path.is_file() or (not path.exists() and Path(spec).suffix.lower() in VIDEO_EXTENSIONS):
        raise DataError(
            f"--input '{spec}' is a file; a video network predicts folders of frames: extract them first "
            f"(ffmpeg -i '{spec}' '{Path(spec).with_suffix('')}/%05d.jpg') and give that folder"
        )
    if path.is_dir():
        found = (
            [path]
            if _holds_frames(path)
            else [Path(d) for d, _, files in walk_visible(path) if any(f.lower().endswith(EXTENSIONS) for f in files)]
        )
    else:
        found = [p for p in glob_visible(str(path)) if _holds_frames(p)]
    if not found:
        raise DataError(
            f"--input '{spec}' holds no folders of frames (a video is a folder of {', '.join(EXTENSIONS)} frames)"
        )
    return sorted(found)


class FrameFolders(FrameFolderSource):
    """Videos as folders of frames, a source (``utils/data/sources/source.py``): ``name_of(v)`` (the CSV's
    ``path``), ``frame_counts`` and ``frames`` (``read_clip``). A packed split's videos are read alike, through
    the pack reader (``utils/data/predict_shards.py``)."""

    def __init__(self, folders: Sequence[Path]) -> None:
        self.paths = list(folders)
        self.keys = StringTable.from_strings(str(folder) for folder in self.paths)
        self.labels = np.zeros(len(self.paths), np.int64)  # inputs to predict: no labels
        self.frame_counts = frame_counts(self.paths)

    def name_of(self, at: int) -> str:
        return str(self.paths[at])


class PredictVideos(ClipDataset):
    """The evaluation clips of each video of ``source`` (:class:`FrameFolders`, or the pack reader of a packed
    split's videos); items
    ``(clip [C, T, H, W], {"label": 0, "video": v})``, ``(None, ...)`` for a clip skipped under ``on_bad_sample=skip``."""

    def __init__(
        self, source: Source, transform: Optional[Callable], clips: ClipArgs, sizing: Sizing, on_bad_sample: str
    ) -> None:
        super().__init__("predict", transform, clips.clip_len, clips.frame_stride, clips.num_clips, clips.pad_short)
        self.source = source
        self.paths = [source.name_of(at) for at in range(len(source))]
        self.sizing = sizing
        self.bad = BadSamples(on_bad_sample, "predict")
        self.set_videos([0] * len(self.paths), source.frame_counts, self.paths)  # type: ignore[attr-defined]

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        return self.source.frames(video, indices)  # type: ignore[attr-defined]

    def __getitem__(self, index: int) -> Tuple[Optional[torch.Tensor], Dict[str, int]]:
        video = self.locate(index)[0] if 0 <= index < len(self) else 0
        try:
            clip, target = super().__getitem__(index)
        except BadFile as err:
            if self.bad.policy == "stop":
                raise DataError(f"{err}, or set data.args.on_bad_sample=skip") from err
            log.warning("skipping a clip of '%s': %s; data.args.on_bad_sample=skip", self.paths[video], err.skipped)
            return None, {"label": 0, "video": video}
        self.sizing.check(clip, self.paths[video])
        return clip, target

    def collate_fn(self, batch: List[Tuple[Any, Dict[str, int]]]) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """The readable clips stacked; skipped ones left out."""
        kept = [(clip, target) for clip, target in batch if clip is not None]
        if not kept:
            return torch.zeros(0, *(self.sizing.trained_at or (self.sizing.channels, 1, 1, 1))), {
                "label": torch.zeros(0, dtype=torch.long),
                "video": torch.zeros(0, dtype=torch.long),
            }
        return default_collate(kept)
