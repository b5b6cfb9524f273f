"""Videos extracted to frames: ``<class>/<video>/<frame>.jpg`` (UCF101, Kinetics, HMDB51 dumps).

Two ways to say which videos form a split:

- split folders: ``<root>/<split>/<class>/<video>/<frame>.jpg``;
- split files (``split_files: {train: trainlist01.txt, test: testlist01.txt}``,
  paths relative to ``root``): one video per line, ``<class>/<video>[.avi] [anything]``,
  frames under ``<root>/<class>/<video>/``. UCF101's official lists work as they are.

Frames are sorted by the numbers in their names (``img_2`` before ``img_10``) and read as
stored (``utils/data/images.py``); hidden and debris names are no classes, videos or frames.
A class folder without videos is an error; a split without some class is a warning.
Class indices follow ``classes`` when given, else the sorted class names found
in all split folders or all listed split files (so every split agrees).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List, Optional, Union

import torch

from utils.config.arguments import Count
from utils.data.clips import ClipDataset
from utils.data.folders import subfolders, warn_missing_classes
from utils.data.frames import list_frames, read_clip
from utils.data.identity import relative_key
from utils.data.samplers import WindowOrder
from utils.data.shards.reader import DEFAULT_CACHE_LIMIT
from utils.data.sources.pack import PACK_INERT, PackArgs, check_folders, open_packed
from utils.data.sources.video_folders import read_split_file, scan_split_folder
from utils.data.string_table import StringTable
from utils.errors import ConfigError, DataError
from utils.registry import DATASETS


@DATASETS.register("video_frames_folder")
class VideoFramesFolder(ClipDataset):
    """Clips of ``clip_len`` frames, ``frame_stride`` apart, from frame folders (see the module doc)."""

    INERT_ARGS = PACK_INERT  # data.args a resume may change (utils/checkpoint/guard.py)
    task = "video"  # the eval.metric its samples are for (utils/data/input_shape.py: check_task)
    check_folders = staticmethod(check_folders)  # a remote pack's cache folder, checked before a run folder is made

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
        self.packed = open_packed(root, split, "video", pack, "video_frames_folder")
        if self.packed is not None:  # a pack: the index's videos (frame counts: their members)
            packed = self.packed
            packed.ignores(VideoFramesFolder.__init__, split_files=split_files)
            self.classes = packed.classes(classes)
            self.num_classes = len(self.classes) if self.classes is not None else packed.num_classes
            names = StringTable.from_strings(packed.name_of(at) for at in range(len(packed)))
            self.set_videos(packed.labels, packed.index.samples["count"], names, packed.key_table())
        else:
            self._scan(Path(root), split, split_files, classes)

    def _scan(
        self, base: Path, split: str, split_files: Optional[Dict[str, str]], classes: Optional[List[str]]
    ) -> None:
        if split_files:
            if split not in split_files:
                raise ConfigError(
                    f"data.args.split_files has no entry for split '{split}'; add one (it may name the test list)"
                )
            lists = {s: read_split_file(base, base / f) for s, f in split_files.items()}
            videos = lists[split]
            known = sorted({c for entries in lists.values() for c, _ in entries})
        else:
            videos = scan_split_folder(base / split)
            splits = {split, *(s for s in ("train", "val", "test") if (base / s).is_dir())}
            known = sorted({c for s in splits for c in subfolders(base / s)})
        self.classes = list(classes) if classes else known
        index = {name: i for i, name in enumerate(self.classes)}
        unknown = sorted({c for c, _ in videos if c not in index})
        if unknown:
            raise DataError(
                f"classes {unknown[:5]} of split '{split}' are not in data.args.classes; add them or drop those videos"
            )
        self.num_classes = len(self.classes)
        warn_missing_classes(
            base / split if not split_files else base / split_files[split], self.classes, {c for c, _ in videos}
        )
        for _, folder in videos:
            if not folder.is_dir():
                raise DataError(
                    f"video folder '{folder}' does not exist; extract its frames there or drop it from the split"
                )
        self.set_videos(
            [index[c] for c, _ in videos],
            [len(list_frames(folder)) for _, folder in videos],
            StringTable.from_strings(str(folder) for _, folder in videos),
            StringTable.from_strings(relative_key(str(folder), str(base)) for _, folder in videos),
        )

    def folder(self, video: int) -> Path:
        """The frame folder of video ``video`` (its name)."""
        return Path(self.names[video])

    def read_frames(self, video: int, indices: List[int]) -> torch.Tensor:
        if self.packed is not None:
            return self.packed.frames(video, indices)
        return read_clip(self.folder(video), indices)

    def window_order(self) -> Optional[WindowOrder]:
        """A pack's shard-window order (``data.args.shuffle_window``, in training: an item is a video); None for
        files (a shuffle of the split)."""
        return self.packed.window_order() if self.packed is not None and self.training else None
