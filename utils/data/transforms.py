"""Transforms from config: torchvision.transforms.v2 classes selected by name.

``[{name: RandomCrop, size: 8, padding: 1}, {name: RandomHorizontalFlip}]``
becomes ``v2.Compose([v2.RandomCrop(size=8, padding=1), v2.RandomHorizontalFlip()])``.
v2 transforms apply the same random parameters to an image and its
``tv_tensors.Mask`` or to every frame of a ``tv_tensors.Video``, which is what
dense prediction and video tasks need. A crop larger than the image it gets
(``RandomCrop``, ``FiveCrop``, ``TenCrop``, and ``CenterCrop``, which v2 would pad
with black) is a DataError naming both sizes and the fix.
"""

from __future__ import annotations

import difflib
import re
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional

from utils.errors import ConfigError, DataError

# what torchvision's crops raise for a crop larger than their input (RandomCrop; FiveCrop, TenCrop)
CROP_TOO_LARGE = re.compile(r"(?:Required|Requested) crop size [(\[](\d+), (\d+)[)\]] is (?:larger|bigger) than input (?:image )?size \((\d+), (\d+)\)")


def _v2() -> ModuleType:
    # imported on first use: torchvision pulls in its model zoo and torch._dynamo (about 1 s),
    # which a run without transforms, or ``main.py --help``, does not need
    from torchvision.transforms import v2

    return v2


def _names() -> List[str]:
    v2 = _v2()
    return [n for n in dir(v2) if n[:1].isupper() and isinstance(getattr(v2, n), type)]


class ConfiguredTransforms:
    """The ``v2.Compose`` of a ``data.*_transforms`` list; a crop larger than its input becomes a DataError."""

    def __init__(self, compose: Callable, key: str) -> None:
        self.compose = compose
        self.key = key

    def __call__(self, *inputs: Any) -> Any:
        try:
            return self.compose(*inputs)
        except ValueError as err:
            match = CROP_TOO_LARGE.search(str(err))
            if match is None:
                raise
            crop_h, crop_w, h, w = match.groups()
            raise DataError(
                f"{self.key}: a crop of {crop_w}x{crop_h} is larger than the image it gets, {w}x{h} (width x height); "
                "put a Resize before it, make the crop smaller, or let RandomCrop pad (pad_if_needed: true)"
            ) from err


def _strict_center_crop() -> type:
    """v2.CenterCrop that refuses (as RandomCrop does) to pad an image smaller than the crop with black."""
    v2 = _v2()

    class StrictCenterCrop(v2.CenterCrop):
        def transform(self, inpt: Any, params: Dict[str, Any]) -> Any:
            height, width = v2.functional.get_size(inpt)
            if self.size[0] > height or self.size[1] > width:
                raise ValueError(f"Required crop size {tuple(self.size)} is larger than input image size {(height, width)}")
            return super().transform(inpt, params)

    StrictCenterCrop.__qualname__ = StrictCenterCrop.__name__  # pickled by name (DataLoader workers): see __getattr__
    return StrictCenterCrop


def __getattr__(name: str) -> Any:
    # made on first use, so importing this module does not import torchvision
    if name == "StrictCenterCrop":
        globals()[name] = _strict_center_crop()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def build_transforms(specs: List[Dict[str, Any]], key: str = "data.*_transforms") -> Optional[Callable]:
    """The listed transforms (``key`` names their config list in errors), or None for an empty list."""
    if not specs:
        return None
    v2 = _v2()
    ops = []
    for spec in specs:
        spec = dict(spec)
        name = spec.pop("name", None)
        if name is None or not hasattr(v2, name) or name not in _names():
            hint = difflib.get_close_matches(str(name), _names(), n=1)
            fix = f"; did you mean '{hint[0]}'?" if hint else ""
            raise ConfigError(f"unknown transform '{name}' in data.*_transforms (torchvision.transforms.v2 class names){fix}")
        cls = __getattr__("StrictCenterCrop") if name == "CenterCrop" else getattr(v2, name)
        try:
            ops.append(cls(**spec))
        except TypeError as err:
            raise ConfigError(f"transform '{name}' rejected its arguments {spec}: {err}") from err
    return ConfiguredTransforms(v2.Compose(ops), key)
