"""Class-per-folder images: ``<root>/<split>/<class>/<image>`` (ImageNet layout).

One class list for every split: the train split's class folders (sorted), or
``classes`` (``data.args.classes``, or the list a checkpoint saved, in test
mode). A val/test class folder that the list lacks is an error naming it; a
class missing from val/test keeps its index. Symlinked folders are followed,
but each real directory is read once per class, so a link back up the tree
does not loop.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import torch
from PIL import Image
from torch.utils.data import Dataset, default_collate

from utils.errors import ConfigError, DataError
from utils.registry import DATASETS

log = logging.getLogger(__name__)

# torchvision's list (torchvision.datasets.folder.IMG_EXTENSIONS), kept here: importing torchvision costs about 1 s
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

# What a damaged or hostile file raises while PIL opens and decodes it: truncated or not an
# image (OSError, UnidentifiedImageError), broken chunks (SyntaxError, ValueError), and a
# decompression bomb (the warning is raised as an error while reading).
BAD_IMAGE = (OSError, SyntaxError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning)


def class_folders(folder: Path) -> List[str]:
    """The class names under ``folder``: its subfolders (symlinked ones too), sorted."""
    return sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())


def scan(folder: Path, classes: Sequence[str]) -> List[Tuple[str, int]]:
    """``(path, class index)`` of every image under ``folder/<class>/``, in a fixed order.

    Symlinked directories are followed, but a real directory is read once per
    class: a link back into the tree (``a/again -> ../a``) adds nothing.
    """
    samples: List[Tuple[str, int]] = []
    for index, name in enumerate(classes):
        top = folder / name
        if not top.is_dir():
            continue
        seen: Set[str] = set()
        found: List[Tuple[str, List[str]]] = []
        for dirpath, dirnames, filenames in os.walk(top, followlinks=True):
            real = os.path.realpath(dirpath)
            if real in seen:
                dirnames[:] = []  # a loop or a second link to a directory already read
                continue
            seen.add(real)
            found.append((dirpath, [f for f in filenames if f.lower().endswith(IMG_EXTENSIONS)]))
        for dirpath, files in sorted(found):
            samples += [(os.path.join(dirpath, f), index) for f in sorted(files)]
    return samples


def read_image(path: str) -> Image.Image:
    """The image at ``path`` as RGB; a decompression-bomb warning is raised as an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        with open(path, "rb") as fh:
            return Image.open(fh).convert("RGB")


@DATASETS.register("image_folder")
class ImageFolder(Dataset):
    """Images as float tensors in [0, 1]; ``test`` falls back to ``val`` when absent.

    An unreadable image (truncated, not an image, a decompression bomb) stops
    the run with its path (``on_bad_sample="stop"``), or is replaced by the
    next readable one with a warning per file (``"skip"``, i.e.
    ``data.args={on_bad_sample: skip}``). Images of different sizes that reach
    one batch are an error naming two of them and the resize to add.
    """

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        image_size: Optional[int] = None,
        on_bad_sample: str = "stop",
        classes: Optional[Sequence[str]] = None,
    ) -> None:
        if on_bad_sample not in ("stop", "skip"):
            raise ConfigError(f"image_folder: data.args.on_bad_sample must be 'stop' or 'skip', got '{on_bad_sample}'")
        if root is None:
            raise ConfigError("dataset image_folder needs data.root=<folder with train/ and val/ inside>")
        self.on_bad_sample = on_bad_sample
        self.bad: Set[int] = set()
        self.root = folder = self._split_folder(Path(root), split)
        self.classes = self._class_list(Path(root), folder, classes)
        self.num_classes = len(self.classes)
        self.samples = scan(folder, self.classes)
        if not self.samples:
            raise DataError(f"data folder '{folder}' holds no images (looked for {', '.join(IMG_EXTENSIONS)} under {folder}/<class>/)")
        from torchvision.transforms import v2  # here, not at import: torchvision costs about 1 s

        resize = [v2.Resize((image_size, image_size), antialias=True)] if image_size else []
        self.to_tensor = v2.Compose([v2.ToImage(), *resize, v2.ToDtype(torch.float32, scale=True)])
        self.transform = transform
        self._first_of_shape: Dict[Tuple[int, ...], str] = {}  # this process's first file of each tensor shape

    @staticmethod
    def _split_folder(root: Path, split: str) -> Path:
        folder = root / split
        if split == "test" and not folder.is_dir():
            folder = root / "val"
        if not folder.is_dir():
            raise DataError(f"data folder '{folder}' does not exist; expected <root>/{split}/<class>/<image>")
        return folder

    @staticmethod
    def _class_list(root: Path, folder: Path, classes: Optional[Sequence[str]]) -> List[str]:
        """``classes`` when given, else the train split's class folders (the split's own when train is absent)."""
        own = class_folders(folder)
        if classes is None:
            train = root / "train"
            classes = class_folders(train) if train.is_dir() else own
            if not classes:
                raise DataError(f"data folder '{train if train.is_dir() else folder}' holds no images: it has no class folders; expected <root>/<split>/<class>/<image>")
        unknown = [name for name in own if name not in classes]
        if unknown:
            raise DataError(
                f"class folder(s) {unknown} in '{folder}' are not classes of the training split ({', '.join(classes)}); "
                "remove them, add them to the train split, or list every class in data.args.classes"
            )
        return list(classes)

    def __len__(self) -> int:
        return len(self.samples)

    def _read(self, index: int) -> Tuple[Image.Image, int, str]:
        for offset in range(len(self.samples)):
            at = (index + offset) % len(self.samples)
            if at in self.bad:
                continue
            path, label = self.samples[at]
            try:
                return read_image(path), label, path
            except BAD_IMAGE as err:
                if self.on_bad_sample == "stop":
                    raise DataError(f"cannot read image '{path}' ({type(err).__name__}); fix or remove the file, or set data.args.on_bad_sample=skip") from err
                self.bad.add(at)
                log.warning("skipping unreadable image '%s' (%s: %s); data.args.on_bad_sample=skip", path, type(err).__name__, err)
        raise DataError(f"no readable image in '{self.root}'")

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        image, label, path = self._read(index)
        image = self.to_tensor(image)
        if self.transform is not None:
            image = self.transform(image)
        self._first_of_shape.setdefault(tuple(image.shape), path)
        return image, label

    def collate_fn(self, batch: List[Tuple[torch.Tensor, int]]) -> List[torch.Tensor]:
        """``default_collate``, or a DataError naming two files whose images differ in size."""
        shapes = list(dict.fromkeys(tuple(image.shape) for image, _ in batch))
        if len(shapes) > 1:
            (a, b) = shapes[:2]
            raise DataError(
                f"images of different sizes cannot form a batch: '{self._first_of_shape.get(a)}' is {a[-1]}x{a[-2]} "
                f"and '{self._first_of_shape.get(b)}' is {b[-1]}x{b[-2]} (width x height, after the transforms); "
                "resize them all to one size: data.args.image_size=N, or a Resize / RandomResizedCrop in data.train_transforms and a Resize + CenterCrop in data.eval_transforms"
            )
        return default_collate(batch)
