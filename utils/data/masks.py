"""Image + mask pairs for dense prediction: joint transforms, resizing, batching.

One sample becomes ``(image [3, S, S] float, {"mask": [1, S, S] float in [0, 1],
"name": str, "original": uint8 mask at its original size})``. The original mask
is what the metrics compare against (predictions are resized back to it), and
since original sizes differ within a batch, :class:`MaskBatchCollate` keeps
them as a list while stacking the resized tensors.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
import torch.nn.functional as F

from utils.errors import ConfigError, DataError

Size = Union[int, Sequence[int]]


def _pair(size: Size) -> Tuple[int, int]:
    if isinstance(size, int):
        return size, size
    if len(size) != 2:
        raise ConfigError(f"size must be an int or [height, width], got {list(size)}")
    return int(size[0]), int(size[1])


class PairPipeline:
    """Turns an ``(H, W, 3)`` uint8 image and an ``(H, W)`` uint8 mask into a training sample.

    ``transform`` (torchvision.transforms.v2, e.g. from ``data.train_transforms``)
    receives ``(tv_tensors.Image, tv_tensors.Mask)`` as floats in [0, 1], so random
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
        self.size = _pair(size) if size else None
        self.transform = transform
        self.keep_original = keep_original

    def __call__(self, image: np.ndarray, mask: np.ndarray, name: str) -> Tuple[torch.Tensor, Dict[str, Any]]:
        if image.shape[:2] != mask.shape[:2]:
            raise DataError(f"sample '{name}': image is {image.shape[:2]} but its mask is {mask.shape[:2]}; they must have the same size")
        from torchvision import tv_tensors  # here, not at import: torchvision costs about 1 s to import
        from torchvision.transforms.v2 import functional as TF

        img = tv_tensors.Image(torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float().div_(255.0))
        msk = tv_tensors.Mask(torch.from_numpy(np.ascontiguousarray(mask)).unsqueeze(0).float().div_(255.0))
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
    not per sample.
    """

    def __init__(self, scales: Optional[Sequence[float]] = None, size_divisor: int = 32) -> None:
        if scales is not None and (not scales or any(s <= 0 for s in scales)):
            raise ConfigError(f"multi_scale must be a non-empty list of positive factors, got {scales}")
        self.scales = list(scales) if scales else None
        self.size_divisor = max(int(size_divisor), 1)

    def __call__(self, batch: List[Tuple[torch.Tensor, Dict[str, Any]]]) -> Tuple[torch.Tensor, Dict[str, Any]]:
        images = torch.stack([image for image, _ in batch])
        targets: Dict[str, Any] = {"mask": torch.stack([t["mask"] for _, t in batch])}
        for key in batch[0][1]:
            if key != "mask":
                targets[key] = [t[key] for _, t in batch]
        if self.scales:
            scale = self.scales[int(torch.randint(len(self.scales), ()).item())]
            size = [max(self.size_divisor, int(round(s * scale / self.size_divisor)) * self.size_divisor) for s in images.shape[-2:]]
            if size != list(images.shape[-2:]):
                images = F.interpolate(images, size=size, mode="bilinear", align_corners=False)
                targets["mask"] = F.interpolate(targets["mask"], size=size, mode="nearest")
        return images, targets
