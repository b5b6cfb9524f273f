"""Image + mask pairs for dense prediction: joint transforms, resizing, batching.

One sample becomes ``(image [C, S, S] float, {"mask": [1, S, S] float in [0, 1],
"name": str, "original": float32 mask in [0, 1] at its original size})``. The
original mask is what the metrics compare against (predictions are resized back
to it), and since original sizes differ within a batch, :class:`MaskBatchCollate`
keeps them as a list while stacking the resized tensors.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from utils.data.batch import check_one_size
from utils.errors import ConfigError, DataError

Size = Union[int, Sequence[int]]


def size_pair(size: Size) -> Tuple[int, int]:
    if isinstance(size, int):
        return size, size
    if len(size) != 2:
        raise ConfigError(f"size must be an int or [height, width], got {list(size)}")
    return int(size[0]), int(size[1])


class PairPipeline:
    """Turns a ``[C, H, W]`` float image and an ``(H, W)`` float32 mask, both in [0, 1]
    (``utils/data/images.py``, ``utils/data/mask_encoding.py``), into a training sample.

    ``transform`` (torchvision.transforms.v2, e.g. from ``data.train_transforms``)
    receives ``(tv_tensors.Image, tv_tensors.Mask)`` as they come, so random
    flips, crops and scales draw one set of parameters for both. Afterwards both
    are resized to ``size`` (the mask with nearest neighbours, as v2 does for masks).
    Normalization is the loader's job (``data.mean``/``data.std``).
    """

    def __init__(
        self,
        size: Optional[Size],
        transform: Optional[Callable] = None,
        keep_original: bool = True,
    ) -> None:
        self.size = size_pair(size) if size else None
        self.transform = transform
        self.keep_original = keep_original

    def __call__(self, image: torch.Tensor, mask: np.ndarray, name: str) -> Tuple[torch.Tensor, Dict[str, Any]]:
        if tuple(image.shape[-2:]) != tuple(mask.shape):
            raise DataError(
                f"sample '{name}': image is {tuple(image.shape[-2:])} but its mask is {tuple(mask.shape)} (height, width); they must have the same size"
            )
        from torchvision import tv_tensors  # here, not at import: torchvision costs about 1 s to import
        from torchvision.transforms.v2 import functional as TF

        img = tv_tensors.Image(image)
        msk = tv_tensors.Mask(torch.from_numpy(np.ascontiguousarray(mask)).unsqueeze(0))
        if self.transform is not None:
            img, msk = self.transform(img, msk)
        if self.size is not None:
            img = TF.resize(img, list(self.size), antialias=True)
            msk = TF.resize(msk, list(self.size))
        target: Dict[str, Any] = {"mask": msk.as_subclass(torch.Tensor), "name": name}
        if self.keep_original:
            target["original"] = mask
        return img.as_subclass(torch.Tensor), target


class MaskBatchCollate:
    """Stacks images and masks; keeps names and original masks as lists.

    With ``scales`` (multi-scale training, e.g. ``[0.75, 1.0, 1.25]``) every batch
    is resized by one randomly chosen scale, its side rounded to a multiple of
    ``size_divisor``: a whole batch must share one size, so this happens here and
    not per sample. Images of different sizes (``size: null``) are a DataError
    naming two of them (their ``paths`` by sample name, when given).
    """

    def __init__(
        self,
        scales: Optional[Sequence[float]] = None,
        size_divisor: int = 32,
        paths: Optional[Mapping[str, str]] = None,
    ) -> None:
        if scales is not None and (not scales or any(s <= 0 for s in scales)):
            raise ConfigError(f"multi_scale must be a non-empty list of positive factors, got {scales}")
        self.scales = list(scales) if scales else None
        self.size_divisor = max(int(size_divisor), 1)
        self.paths = paths or {}

    def __call__(self, batch: List[Tuple[torch.Tensor, Dict[str, Any]]]) -> Tuple[torch.Tensor, Dict[str, Any]]:
        names = [str(t.get("name", "?")) for _, t in batch]
        check_one_size(
            [(self.paths.get(n, n), image.shape) for n, (image, _) in zip(names, batch)],
            "data.args.size=N (or [height, width])",
        )
        images = torch.stack([image for image, _ in batch])
        targets: Dict[str, Any] = {"mask": torch.stack([t["mask"] for _, t in batch])}
        for key in batch[0][1]:
            if key != "mask":
                targets[key] = [t[key] for _, t in batch]
        if self.scales:
            scale = self.scales[int(torch.randint(len(self.scales), ()).item())]
            size = [
                max(self.size_divisor, int(round(s * scale / self.size_divisor)) * self.size_divisor)
                for s in images.shape[-2:]
            ]
            if size != list(images.shape[-2:]):
                images = F.interpolate(images, size=size, mode="bilinear", align_corners=False)
                targets["mask"] = F.interpolate(targets["mask"], size=size, mode="nearest")
        return images, targets
