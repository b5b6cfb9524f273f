"""Transforms from config: torchvision.transforms.v2 classes selected by name.

``[{name: RandomCrop, size: 8, padding: 1}, {name: RandomHorizontalFlip}]``
becomes ``v2.Compose([v2.RandomCrop(size=8, padding=1), v2.RandomHorizontalFlip()])``.
v2 transforms apply the same random parameters to an image and its
``tv_tensors.Mask`` or to every frame of a ``tv_tensors.Video``, which is what
dense prediction and video tasks need.
"""

from __future__ import annotations

import difflib
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional

from utils.errors import ConfigError


def _v2() -> ModuleType:
    # imported on first use: torchvision pulls in its model zoo and torch._dynamo (about 1 s),
    # which a run without transforms, or ``main.py --help``, does not need
    from torchvision.transforms import v2

    return v2


def _names() -> List[str]:
    v2 = _v2()
    return [n for n in dir(v2) if n[:1].isupper() and isinstance(getattr(v2, n), type)]


def build_transforms(specs: List[Dict[str, Any]]) -> Optional[Callable]:
    """A ``v2.Compose`` of the listed transforms, or None for an empty list."""
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
        try:
            ops.append(getattr(v2, name)(**spec))
        except TypeError as err:
            raise ConfigError(f"transform '{name}' rejected its arguments {spec}: {err}") from err
    return v2.Compose(ops)
