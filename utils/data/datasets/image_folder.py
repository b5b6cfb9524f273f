"""Class-per-folder images: ``<root>/<split>/<class>/<image>`` (ImageNet layout)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Optional, Set, Tuple

import torch
from PIL import UnidentifiedImageError
from torch.utils.data import Dataset

from utils.errors import ConfigError, DataError
from utils.registry import DATASETS

log = logging.getLogger(__name__)


@DATASETS.register("image_folder")
class ImageFolder(Dataset):
    """Images as float tensors in [0, 1]; ``test`` falls back to ``val`` when absent.

    An unreadable image (truncated, not an image) stops the run with its path
    (``on_bad_sample="stop"``), or is replaced by the next readable one with a
    warning per file (``"skip"``, i.e. ``data.args={on_bad_sample: skip}``).
    """

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        image_size: Optional[int] = None,
        on_bad_sample: str = "stop",
    ) -> None:
        if on_bad_sample not in ("stop", "skip"):
            raise ConfigError(f"image_folder: data.args.on_bad_sample must be 'stop' or 'skip', got '{on_bad_sample}'")
        self.on_bad_sample = on_bad_sample
        self.bad: Set[int] = set()
        if root is None:
            raise ConfigError("dataset image_folder needs data.root=<folder with train/ and val/ inside>")
        folder = Path(root) / split
        if split == "test" and not folder.is_dir():
            folder = Path(root) / "val"
        if not folder.is_dir():
            raise DataError(f"data folder '{folder}' does not exist; expected <root>/{split}/<class>/<image>")
        from torchvision.datasets import ImageFolder as _TorchImageFolder  # here, not at import: torchvision costs about 1 s
        from torchvision.transforms import v2

        try:
            self.inner = _TorchImageFolder(str(folder))
        except FileNotFoundError as err:
            raise DataError(f"data folder '{folder}' holds no images: {err}") from err
        self.classes = self.inner.classes
        self.num_classes = len(self.classes)
        resize = [v2.Resize((image_size, image_size), antialias=True)] if image_size else []
        self.to_tensor = v2.Compose([v2.ToImage(), *resize, v2.ToDtype(torch.float32, scale=True)])
        self.transform = transform

    def __len__(self) -> int:
        return len(self.inner)

    def _read(self, index: int) -> Tuple[object, int]:
        for offset in range(len(self.inner)):
            at = (index + offset) % len(self.inner)
            if at in self.bad:
                continue
            try:
                return self.inner[at]
            except (OSError, UnidentifiedImageError) as err:  # truncated files raise OSError
                path = self.inner.samples[at][0]
                if self.on_bad_sample == "stop":
                    raise DataError(f"cannot read image '{path}' ({type(err).__name__}); fix or remove the file, or set data.args.on_bad_sample=skip") from err
                self.bad.add(at)
                log.warning("skipping unreadable image '%s' (%s); data.args.on_bad_sample=skip", path, type(err).__name__)
        raise DataError(f"no readable image in '{self.inner.root}'")

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        image, label = self._read(index)
        image = self.to_tensor(image)
        if self.transform is not None:
            image = self.transform(image)
        return image, label
