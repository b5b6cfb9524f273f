"""What ``--mode predict --input PATH`` reads: an image file, a folder (searched recursively) or a glob.

Images are read as the training data's eval split was (``utils/data/images.py``: the stored
range, the dataset's channels), sized as that dataset sized its samples (:class:`Sizing`:
``data.args.image_size`` before the eval transforms, the mask datasets' ``data.args.size``
after them), then given the config's eval transforms. Each input must then be the size the
network was trained at (``model.input_size``), else the run stops naming both sizes and the
fix: a network fed another size scores without a warning, and wrongly. An unreadable file
follows ``data.args.on_bad_sample``: ``stop`` ends the run naming it, ``skip`` leaves it out
(a warning names it) and the CSV has no row for it. Folders and globs are searched by
``utils/data/folders.py``: hidden and debris names left out, each real directory once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from utils.data.bad_samples import BadFile, BadSamples
from utils.data.batch import check_one_size
from utils.data.folders import glob_visible, split_glob, walk_visible
from utils.data.sources.files import ImageFileSource
from utils.data.sources.source import Source
from utils.data.string_table import StringTable
from utils.data.transforms import pixels_then_floats
from utils.errors import DataError

log = logging.getLogger(__name__)

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm")


@dataclass(frozen=True)
class Sizing:
    """How the checkpoint's training data sized an eval sample, and the size the network was trained at.

    ``resize_first``: (height, width) every image is resized to before the eval transforms
    (``image_folder``'s ``image_size``, ``digits``' ``size``); ``crop_first``: the side the
    shorter side is resized to, then the centre square cut (``data.loader=dali``'s eval pipeline);
    ``resize_last``: after the transforms (the mask datasets' ``size``); ``trained_at``:
    ``model.input_size`` (None: not checked); ``fix``: the override that makes predict resize
    the inputs, named in the error.
    """

    channels: int
    resize_first: Optional[Tuple[int, int]] = None
    resize_last: Optional[Tuple[int, int]] = None
    trained_at: Optional[Tuple[int, ...]] = None
    fix: str = ""
    crop_first: Optional[int] = None

    def check(self, sample: torch.Tensor, path: Path) -> None:
        """DataError when ``sample`` (after the transforms) reaches the network at another height x width than it was trained at."""
        if not self.trained_at or len(self.trained_at) < 2:
            return
        (height, width), (want_h, want_w) = sample.shape[-2:], self.trained_at[-2:]
        if (height, width) != (want_h, want_w):
            raise DataError(
                f"input '{path}' reaches the network at {width}x{height} (width x height, after data.eval_transforms), but the checkpoint "
                f"was trained at {want_w}x{want_h} (model.input_size={list(self.trained_at)}); resize the inputs to {want_w}x{want_h}, "
                f"or let predict resize them: {self.fix}"
            )


def collect_inputs(spec: Optional[str]) -> List[Path]:
    """The image files ``spec`` names, in a fixed order (sorted paths); DataError when none."""
    if not spec:
        raise DataError(
            "--mode predict needs --input PATH (an image file, a folder of images, or a glob such as 'photos/*.jpg')"
        )
    path = Path(spec).expanduser()
    if path.is_dir():
        found = [
            Path(d) / f
            for d, _, files in walk_visible(path)
            for f in files
            if f.lower().endswith((*IMG_EXTENSIONS, *VIDEO_EXTENSIONS))
        ]
    elif path.is_file():
        found = [path]
    else:
        found = [p for p in glob_visible(str(path)) if p.is_file()]
        if not found:
            raise DataError(f"--input '{spec}' is not a file, a folder or a glob that matches files")
    videos = [p for p in found if p.suffix.lower() in VIDEO_EXTENSIONS]
    if videos:
        raise DataError(
            f"--mode predict reads images; '{videos[0]}' is a video (predict a video's frames: extract them to a folder of images)"
        )
    images = sorted(p for p in found if p.suffix.lower() in IMG_EXTENSIONS)
    if not images:
        raise DataError(f"--input '{spec}' holds no images (looked for {', '.join(IMG_EXTENSIONS)})")
    return images


def input_root(spec: str) -> Path:
    """The folder the inputs of ``spec`` are named relative to: the folder given, a file's folder, or
    the part of a glob before its first wildcard."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return path
    return path.parent if path.is_file() else split_glob(str(path))[0]


def _below(path: Path, root: Path) -> Path:
    try:
        return path.relative_to(root)
    except ValueError:  # not under the root (a path the glob spelt differently): its name alone
        return Path(path.name)


def mask_names(relative: Sequence[Union[str, Path]]) -> List[Path]:
    """Each input's mask file, relative to the masks folder: the input's name below its root (``relative``) with
    ``.png`` for its extension, so the masks mirror the input tree. Where inputs of one folder share
    a stem (``x.png``, ``x.jpg``), each whose name is not already that ``.png`` keeps its extension
    (``x.jpg.png``); no two inputs share a mask file (compared without case, as some disks do)."""
    relative = [Path(rel) for rel in relative]
    groups: Dict[str, List[int]] = defaultdict(list)
    for i, rel in enumerate(relative):
        groups[str(rel.with_suffix(".png")).casefold()].append(i)
    names = [rel.with_suffix(".png") for rel in relative]
    for members in groups.values():
        if len(members) > 1:
            for i in members:
                if relative[i] != names[i]:
                    names[i] = relative[i].with_name(relative[i].name + ".png")
    used: Set[str] = set()
    # a name made above may be another input's own (x.jpg's x.jpg.png): the owner keeps it, the other is numbered
    for i in sorted(range(len(names)), key=lambda i: relative[i] != names[i]):
        count = 1
        while str(names[i]).casefold() in used:
            names[i] = relative[i].with_name(f"{relative[i].name}.{count}.png")
            count += 1
        used.add(str(names[i]).casefold())
    return names


class ImageFiles(ImageFileSource):
    """Image files as predict reads them, a source (``utils/data/sources/source.py``): ``name_of(i)`` (the CSV's
    ``path``), ``keys`` (each file below ``root``: its mask's name) and ``image`` (``read_pixels``). A packed split
    is read alike, through the pack reader (``utils/data/predict_shards.py``)."""

    def __init__(self, paths: Sequence[Path], root: Path) -> None:
        self.paths = list(paths)
        self.where = str(root)
        self.keys = StringTable.from_strings(str(_below(Path(p), root)) for p in self.paths)
        self.labels = np.full(len(self.paths), -1, np.int64)  # inputs to predict: no labels

    def name_of(self, at: int) -> str:
        return str(self.paths[at])


class PredictImages(Dataset):
    """Items ``(image [C, H, W], {"index": i, "size": [H0, W0]})`` of ``source`` (:class:`ImageFiles`, or the pack
    reader of a packed split); ``size``: the image's own size. ``decode_for_crop``: the training dataset decoded JPEGs at
    the size its eval resize needs (``image_folder``'s ``data.args.decode_for_crop``), and so does this."""

    def __init__(
        self,
        source: Source,
        sizing: Sizing,
        transform: Optional[Callable],
        on_bad_sample: str,
        decode_for_crop: bool = False,
    ) -> None:
        self.source = source
        self.paths = [source.name_of(at) for at in range(len(source))]
        self.sizing = sizing
        self.transform = transform
        self.bad = BadSamples(on_bad_sample, "predict")
        self.for_crop = None
        if decode_for_crop and sizing.resize_last is None and sizing.crop_first is None:
            from torchvision.transforms import v2

            from utils.data.crop_decode import crop_reader

            first = v2.Resize(list(sizing.resize_first), antialias=True) if sizing.resize_first else None
            self.for_crop = crop_reader(transform, first)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Tuple[Optional[torch.Tensor], dict]:
        path = self.paths[index]
        try:
            values, size = self._read(index)
        except BadFile as err:
            if self.bad.policy == "stop":
                raise DataError(f"{err}, or set data.args.on_bad_sample=skip") from err
            log.warning("skipping %s; data.args.on_bad_sample=skip", err.skipped)
            return None, {"index": index}
        from torchvision.transforms.v2 import functional as TF

        sized_first = self.sizing.resize_first is not None or self.sizing.crop_first is not None
        # read as the training dataset read its images (utils/data/transforms.py): sized, then floats, then transformed
        image = pixels_then_floats(values, self._size_first if sized_first else None, self.transform)
        if self.sizing.resize_last is not None:  # after the transforms, as the mask datasets resize
            image = TF.resize(image, list(self.sizing.resize_last), antialias=True)
        self.sizing.check(image, path)
        return image.as_subclass(torch.Tensor), {"index": index, "size": size}

    def _read(self, index: int) -> Tuple[torch.Tensor, List[int]]:
        """The stored values (decoded at the size the eval resize needs where ``for_crop`` serves the file) and
        the image's own size."""
        if self.for_crop is not None:
            data, ext = self.source.image_bytes(index)  # type: ignore[attr-defined]
            if ext != "npy":  # an in-memory dataset's packed tensor is no file to decode
                decoded = self.for_crop.read(data, str(self.paths[index]), self.sizing.channels)
                return decoded.values, list(decoded.size or decoded.values.shape[-2:])
        values = self.source.image(index, self.sizing.channels)  # type: ignore[attr-defined]
        return values, list(values.shape[-2:])

    def _size_first(self, image: Any) -> Any:
        """The sizing ahead of the eval transforms, on the stored pixels (8-bit data as uint8, as image_folder)."""
        from torchvision.transforms.v2 import functional as TF

        if self.sizing.resize_first is not None:
            image = TF.resize(image, list(self.sizing.resize_first), antialias=True)
        if self.sizing.crop_first is not None:  # as DALI's eval pipeline: the shorter side, then the centre
            image = TF.center_crop(
                TF.resize(image, self.sizing.crop_first, antialias=True), [self.sizing.crop_first] * 2
            )
        return image

    def collate_fn(self, batch: List[Tuple[Any, dict]]) -> Tuple[torch.Tensor, dict]:
        """The readable items stacked (a DataError naming two files of different sizes, where no trained size
        was checked); skipped ones left out."""
        kept = [(image, target) for image, target in batch if image is not None]
        if not kept:  # every file of the batch was skipped
            shape = self.sizing.trained_at or (self.sizing.channels, 1, 1)
            return torch.zeros(0, *shape), {
                "index": torch.zeros(0, dtype=torch.long),
                "size": torch.zeros(0, 2, dtype=torch.long),
            }
        check_one_size([(str(self.paths[t["index"]]), image.shape) for image, t in kept], self.sizing.fix)
        images = default_collate([image for image, _ in kept])
        return images, {
            "index": torch.tensor([t["index"] for _, t in kept]),
            "size": torch.tensor([t["size"] for _, t in kept]),
        }
