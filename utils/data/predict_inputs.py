"""What ``--mode predict --input PATH`` reads: an image file, a folder (searched recursively) or a glob.

Images are read as the training data was (``utils/data/images.py``: the stored range,
``data.args.channels``), resized by ``data.args.image_size`` when the config has one,
then given the config's eval transforms. An unreadable file follows
``data.args.on_bad_sample``: ``stop`` ends the run naming it, ``skip`` leaves it out
(a warning names it) and the CSV has no row for it.
"""

from __future__ import annotations

import glob
import logging
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
from torch.utils.data import Dataset, default_collate

from utils.data.bad_samples import BadFile, BadSamples
from utils.data.batch import check_one_size
from utils.data.folders import walk_visible
from utils.data.images import as_float, read_pixels
from utils.data.masks import Size, size_pair
from utils.errors import DataError

log = logging.getLogger(__name__)

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
VIDEO_EXTENSIONS = (".mp4", ".avi", ".mov", ".mkv", ".webm")


def collect_inputs(spec: Optional[str]) -> List[Path]:
    """The image files ``spec`` names, in a fixed order (sorted paths); DataError when none."""
    if not spec:
        raise DataError("--mode predict needs --input PATH (an image file, a folder of images, or a glob such as 'photos/*.jpg')")
    path = Path(spec).expanduser()
    if path.is_dir():
        found = [Path(d) / f for d, _, files in walk_visible(path) for f in files if f.lower().endswith((*IMG_EXTENSIONS, *VIDEO_EXTENSIONS))]
    elif path.is_file():
        found = [path]
    else:
        found = [Path(p) for p in glob.glob(str(path), recursive=True) if Path(p).is_file()]
        if not found:
            raise DataError(f"--input '{spec}' is not a file, a folder or a glob that matches files")
    videos = [p for p in found if p.suffix.lower() in VIDEO_EXTENSIONS]
    if videos:
        raise DataError(f"--mode predict reads images; '{videos[0]}' is a video (predict a video's frames: extract them to a folder of images)")
    images = sorted(p for p in found if p.suffix.lower() in IMG_EXTENSIONS)
    if not images:
        raise DataError(f"--input '{spec}' holds no images (looked for {', '.join(IMG_EXTENSIONS)})")
    return images


class PredictImages(Dataset):
    """Items ``(image [C, H, W], {"index": i, "size": [H0, W0]})``; ``size``: the file's own size."""

    def __init__(self, paths: Sequence[Path], channels: int, transform: Optional[Callable], image_size: Optional[int], on_bad_sample: str,
                 input_size: Sequence[int], resize_last: Optional[Size] = None) -> None:
        self.paths = list(paths)
        self.resize_last = size_pair(resize_last) if resize_last else None  # after the transforms, as the mask datasets resize
        self.channels = channels
        self.transform = transform
        self.image_size = image_size
        self.bad = BadSamples(on_bad_sample, "predict")
        self.input_size = list(input_size)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> Tuple[Optional[torch.Tensor], dict]:
        path = self.paths[index]
        try:
            values = read_pixels(path, self.channels)
        except BadFile as err:
            if self.bad.policy == "stop":
                raise DataError(f"{err}, or set data.args.on_bad_sample=skip") from err
            log.warning("skipping %s; data.args.on_bad_sample=skip", err.skipped)
            return None, {"index": index}
        size = list(values.shape[-2:])
        from torchvision import tv_tensors

        image = tv_tensors.Image(values)
        if self.image_size:
            from torchvision.transforms import v2

            image = v2.Resize((self.image_size, self.image_size), antialias=True)(image)
        image = tv_tensors.wrap(as_float(image.as_subclass(torch.Tensor)), like=image)
        if self.transform is not None:
            image = self.transform(image)
        if self.resize_last is not None:
            from torchvision.transforms.v2 import functional as TF

            image = TF.resize(image, list(self.resize_last), antialias=True)
        return image.as_subclass(torch.Tensor), {"index": index, "size": size}

    def collate_fn(self, batch: List[Tuple[Any, dict]]) -> Tuple[torch.Tensor, dict]:
        """The readable items stacked (a DataError naming two files of different sizes); skipped ones left out."""
        kept = [(image, target) for image, target in batch if image is not None]
        if not kept:  # every file of the batch was skipped
            return torch.zeros(0, *self.input_size), {"index": torch.zeros(0, dtype=torch.long), "size": torch.zeros(0, 2, dtype=torch.long)}
        check_one_size([(str(self.paths[t["index"]]), image.shape) for image, t in kept], "data.args.image_size=N, or a Resize + CenterCrop in data.eval_transforms")
        images = default_collate([image for image, _ in kept])
        return images, {"index": torch.tensor([t["index"] for _, t in kept]), "size": torch.tensor([t["size"] for _, t in kept])}
