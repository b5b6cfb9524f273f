"""Class-per-folder images: ``<root>/<split>/<class>/<image>`` (ImageNet layout).

One class list for every split: the train split's class folders (sorted), or
``classes`` (``data.args.classes``, or the list a checkpoint saved, in test
mode). A val/test class folder that the list lacks is an error naming it; a
class missing from val/test keeps its index (a warning names it); an empty class
folder is an error. Hidden and debris names (``utils/data/folders.py``) are
never classes or images. Symlinked folders are followed, but each real
directory is read once per class, so a link back up the tree does not loop.
Images are read as stored (``utils/data/images.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Dict, List, Literal, Optional, Sequence, Set, Tuple

import torch
from torch.utils.data import Dataset, default_collate

from utils.arguments import Count
from utils.data.bad_samples import BadSamples
from utils.data.batch import check_one_size
from utils.data.folders import subfolders, walk_visible, warn_missing_classes
from utils.data.images import check_channels, read_pixels
from utils.data.transforms import pixels_then_floats
from utils.errors import ConfigError, DataError
from utils.registry import DATASETS

# torchvision's list (torchvision.datasets.folder.IMG_EXTENSIONS), kept here: importing torchvision costs about 1 s
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
RESIZE_FIX = "data.args.image_size=N, or a Resize / RandomResizedCrop in data.train_transforms and a Resize + CenterCrop in data.eval_transforms"


def scan(folder: Path, classes: Sequence[str]) -> List[Tuple[str, int]]:
    """``(path, class index)`` of every image under ``folder/<class>/``, in a fixed order.

    Symlinked directories are followed, but a real directory is read once per
    class: a link back into the tree (``a/again -> ../a``) adds nothing. A class
    folder without images is an error naming it.
    """
    samples: List[Tuple[str, int]] = []
    for index, name in enumerate(classes):
        top = folder / name
        if not top.is_dir():
            continue
        seen: Set[str] = set()
        found: List[Tuple[str, List[str]]] = []
        for dirpath, dirnames, filenames in walk_visible(top):
            real = os.path.realpath(dirpath)
            if real in seen:
                dirnames[:] = []  # a loop or a second link to a directory already read
                continue
            seen.add(real)
            found.append((dirpath, [f for f in filenames if f.lower().endswith(IMG_EXTENSIONS)]))
        before = len(samples)
        for dirpath, files in sorted(found):
            samples += [(os.path.join(dirpath, f), index) for f in sorted(files)]
        if len(samples) == before:
            raise DataError(
                f"class folder '{top}' holds no images (looked for {', '.join(IMG_EXTENSIONS)}); add its images or remove the folder"
            )
    return samples


@DATASETS.register("image_folder")
class ImageFolder(Dataset):
    """Images as float tensors ``[channels, H, W]`` in [0, 1], read as stored.

    ``channels`` (3 by default) is how many the network gets: grey images are
    repeated into 3 equal channels, or colour turned into luma for 1. A missing
    split folder is an error (``data.test_split`` picks the folder testing reads).
    An unusable image (truncated, not an image, a decompression bomb, values out
    of range) stops the run with its path (``on_bad_sample="stop"``), or is
    replaced by the next usable one with a warning per file (``"skip"``, i.e.
    ``data.args={on_bad_sample: skip}``). Images of different sizes that reach
    one batch are an error naming two of them and the resize to add.
    """

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        image_size: Optional[Count] = None,
        on_bad_sample: Literal["stop", "skip"] = "stop",
        classes: Optional[Sequence[str]] = None,
        channels: int = 3,
    ) -> None:
        self.bad_samples = BadSamples(on_bad_sample, "image_folder")
        self.channels = check_channels(channels, "image_folder")
        if root is None:
            raise ConfigError("dataset image_folder needs data.root=<folder with train/ and val/ inside>")
        self.root = folder = self._split_folder(Path(root), split)
        self.classes = self._class_list(Path(root), folder, classes)
        self.num_classes = len(self.classes)
        self.samples = scan(folder, self.classes)
        if not self.samples:
            raise DataError(
                f"data folder '{folder}' holds no images (looked for {', '.join(IMG_EXTENSIONS)} under {folder}/<class>/)"
            )
        warn_missing_classes(folder, self.classes, {self.classes[label] for _, label in self.samples})
        from torchvision.transforms import v2  # here, not at import: torchvision costs about 1 s

        self.resize = v2.Resize((image_size, image_size), antialias=True) if image_size else None
        self.transform = transform
        self._first_of_shape: Dict[Tuple[int, ...], str] = {}  # this process's first file of each tensor shape

    @staticmethod
    def _split_folder(root: Path, split: str) -> Path:
        folder = root / split
        if not folder.is_dir():
            hint = (
                "; data.test_split names the split folder that testing reads (e.g. data.test_split=val)"
                if split not in ("train", "val")
                else ""
            )
            raise DataError(f"data folder '{folder}' does not exist; expected <root>/{split}/<class>/<image>{hint}")
        return folder

    @staticmethod
    def _class_list(root: Path, folder: Path, classes: Optional[Sequence[str]]) -> List[str]:
        """``classes`` when given, else the train split's class folders (the split's own when train is absent)."""
        own = subfolders(folder)
        if classes is None:
            train = root / "train"
            classes = subfolders(train) if train.is_dir() else own
            if not classes:
                raise DataError(
                    f"data folder '{train if train.is_dir() else folder}' holds no images: it has no class folders; expected <root>/<split>/<class>/<image>"
                )
        unknown = [name for name in own if name not in classes]
        if unknown:
            raise DataError(
                f"class folder(s) {unknown} in '{folder}' are not classes of the training split ({', '.join(classes)}); "
                "remove them, add them to the train split, or list every class in data.args.classes"
            )
        return list(classes)

    def __len__(self) -> int:
        return len(self.samples)

    def sample_keys(self) -> List[str]:
        """Each image's path relative to the split folder (``<class>/<file>``): the data's identity, whatever the root."""
        return [os.path.relpath(path, self.root) for path, _ in self.samples]

    def _read(self, at: int) -> Tuple[torch.Tensor, int, str]:
        path, label = self.samples[at]
        return read_pixels(path, self.channels), label, path

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        values, label, path = self.bad_samples.first_usable(index, len(self.samples), self._read, str(self.root))
        image = pixels_then_floats(values, self.resize, self.transform)
        self._first_of_shape.setdefault(tuple(image.shape), path)
        return image, label

    def collate_fn(self, batch: List[Tuple[torch.Tensor, int]]) -> List[torch.Tensor]:
        """``default_collate``, or a DataError naming two files whose images differ in size."""
        check_one_size(
            [(self._first_of_shape.get(tuple(image.shape), "?"), image.shape) for image, _ in batch], RESIZE_FIX
        )
        return default_collate(batch)

    collate_fn.collates_new_tensors = True  # default_collate's new batch: the loader may normalize it in place
