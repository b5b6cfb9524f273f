"""Class-per-folder images: ``<root>/<split>/<class>/<image>`` (ImageNet layout)."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional, Tuple

import torch
from torch.utils.data import Dataset
from torchvision.datasets import ImageFolder as _TorchImageFolder
from torchvision.transforms import v2

from utils.registry import DATASETS


@DATASETS.register("image_folder")
class ImageFolder(Dataset):
    """Images as float tensors in [0, 1]; ``test`` falls back to ``val`` when absent."""

    def __init__(
        self,
        split: str = "train",
        root: Optional[str] = None,
        transform: Optional[Callable] = None,
        image_size: Optional[int] = None,
    ) -> None:
        if root is None:
            raise FileNotFoundError("dataset image_folder needs data.root=<folder with train/ and val/ inside>")
        folder = Path(root) / split
        if split == "test" and not folder.is_dir():
            folder = Path(root) / "val"
        if not folder.is_dir():
            raise FileNotFoundError(f"data folder '{folder}' does not exist; expected <root>/{split}/<class>/<image>")
        try:
            self.inner = _TorchImageFolder(str(folder))
        except FileNotFoundError as err:
            raise FileNotFoundError(f"data folder '{folder}' holds no images: {err}") from err
        self.classes = self.inner.classes
        self.num_classes = len(self.classes)
        resize = [v2.Resize((image_size, image_size), antialias=True)] if image_size else []
        self.to_tensor = v2.Compose([v2.ToImage(), *resize, v2.ToDtype(torch.float32, scale=True)])
        self.transform = transform

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index: int) -> Tuple[torch.Tensor, int]:
        image, label = self.inner[index]
        image = self.to_tensor(image)
        if self.transform is not None:
            image = self.transform(image)
        return image, label
