"""Transforms from config: torchvision.transforms.v2 classes selected by name.

``[{name: RandomCrop, size: 8, padding: 1}, {name: RandomHorizontalFlip}]``
becomes ``v2.Compose([v2.RandomCrop(size=8, padding=1), v2.RandomHorizontalFlip()])``.
v2 transforms apply the same random parameters to an image and its
``tv_tensors.Mask`` or to every frame of a ``tv_tensors.Video``, which is what
dense prediction and video tasks need. A crop larger than the image it gets
(``RandomCrop``, ``FiveCrop``, ``TenCrop``, and ``CenterCrop``, which v2 would pad
with black) is a DataError naming both sizes and the fix. When the config is checked,
``check_transforms`` builds each list and tries it on a fake sample of ``model.input_size``
(a few seeded draws, which training never sees): an entry that fails or empties the
sample, or a list that does not end in a tensor, is one ConfigError naming the entry
(``data.train_transforms[0] (RandomRotation)``).
"""

from __future__ import annotations

import difflib
import re
from types import ModuleType
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import torch

from utils.data.trial import drawing_nothing
from utils.errors import ConfigError, DataError, first_line

# what torchvision's crops raise for a crop larger than their input (RandomCrop; FiveCrop, TenCrop)
CROP_TOO_LARGE = re.compile(
    r"(?:Required|Requested) crop size [(\[](\d+), (\d+)[)\]] is (?:larger|bigger) than (?:padded )?input (?:image )?size "
    r"\((\d+), (\d+)\)"
)


def _v2() -> ModuleType:
    # imported on first use: torchvision pulls in its model zoo and torch._dynamo (about 1 s),
    # which a run without transforms, or ``main.py --help``, does not need
    from torchvision.transforms import v2

    return v2


def _names() -> List[str]:
    v2 = _v2()
    return [n for n in dir(v2) if n[:1].isupper() and isinstance(getattr(v2, n), type)]


class ConfiguredTransforms:
    """The ``v2.Compose`` of a ``data.*_transforms`` list; a crop larger than its input becomes a DataError.

    ``pixels_first``: the list's leading ``PIXEL_OPS`` may run on 8-bit images before they become
    floats (``split_at_float``); the training lists only, so evaluation and predict keep their numbers.
    """

    def __init__(self, compose: Callable, key: str, pixels_first: bool = False) -> None:
        self.compose = compose
        self.key = key
        self.pixels_first = pixels_first
        self.parts: Tuple[Optional[Callable], Optional[Callable]] = (None, self)
        if pixels_first:
            ops = list(compose.transforms)
            n = next((i for i, op in enumerate(ops) if not _on_pixels(op)), len(ops))
            if n:
                rest = ConfiguredTransforms(_v2().Compose(ops[n:]), key) if n < len(ops) else None
                self.parts = (ConfiguredTransforms(_v2().Compose(ops[:n]), key), rest)

    def without_first(self) -> Optional["ConfiguredTransforms"]:
        """The list less its first transform, split as this one is; None when that was the only one (a reader
        that applied the first while decoding runs the rest: ``utils/data/crop_decode.py``)."""
        ops = list(self.compose.transforms)[1:]
        return ConfiguredTransforms(_v2().Compose(ops), self.key, self.pixels_first) if ops else None

    def __call__(self, *inputs: Any) -> Any:
        try:
            return self.compose(*inputs)
        except ValueError as err:
            match = CROP_TOO_LARGE.search(str(err))
            if match is None:
                raise
            crop_h, crop_w, h, w = match.groups()
            padded = " once padded" if "padded" in str(err) else ""  # RandomCrop's padding counted: the size it cropped
            raise DataError(
                f"{self.key}: a crop of {crop_w}x{crop_h} is larger than the image it gets, {w}x{h}{padded} (width x height); "
                "put a Resize before it, make the crop smaller, or let RandomCrop pad (pad_if_needed: true)"
            ) from err


# Transforms that may run on 8-bit images before the float conversion: crops and flips move pixels
# (exact on any dtype, with a zero fill); a resize of uint8 rounds each value to the nearest of the 256
# levels, as torchvision's v2 recipe (ToImage -> RandomResizedCrop -> ToDtype(scale=True)) does. On
# uint8 the resize is about twice as fast, and the conversion then touches the 224x224 crop instead of
# the whole photo: the difference between keeping up with torchvision's ImageFolder and not (issue 31).
PIXEL_OPS = ("Resize", "RandomResizedCrop", "CenterCrop", "RandomCrop", "RandomHorizontalFlip", "RandomVerticalFlip")


def _on_pixels(op: Any) -> bool:
    v2 = _v2()
    if not isinstance(op, tuple(getattr(v2, name) for name in PIXEL_OPS)):
        return False
    fill = getattr(op, "fill", 0)  # a padding crop fills with it: a non-zero float fill means another value on uint8
    fills = list(fill.values()) if isinstance(fill, dict) else list(fill) if isinstance(fill, (list, tuple)) else [fill]
    return all(value in (0, None) for value in fills)


def split_at_float(transform: Optional[Callable]) -> Tuple[Optional[Callable], Optional[Callable]]:
    """``(on 8-bit pixels, on floats)``: the parts of ``transform`` to run before and after an image becomes
    float. Same random draws in the same order as ``transform`` itself; any other callable runs on floats."""
    if isinstance(transform, ConfiguredTransforms):
        return transform.parts
    return None, transform


def pixels_then_floats(
    values: torch.Tensor, resize: Optional[Callable], transform: Optional[Callable], to_float: bool = True
) -> torch.Tensor:
    """An image's stored values (``[C, H, W]``, uint8 for 8-bit data) through ``resize``, then ``transform``:
    its leading crops, resizes and flips on the pixels (cheaper on uint8, torchvision v2's order), the rest on
    floats in [0, 1]. Image folders and their packed copies read through this one path, so they agree.
    ``to_float=False``: a list with nothing after its pixel transforms leaves 8-bit values as they are (the
    loader converts whole batches: ``utils/data/prefetch.py``)."""
    from torchvision import tv_tensors

    from utils.data.images import as_float

    image = tv_tensors.Image(values)
    if resize is not None:
        image = resize(image)
    on_pixels, on_floats = split_at_float(transform)
    if on_pixels is not None:
        image = on_pixels(image)
    if not to_float and on_floats is None:
        return image
    image = tv_tensors.wrap(as_float(image.as_subclass(torch.Tensor)), like=image)
    return on_floats(image) if on_floats is not None else image


def _strict_center_crop() -> type:
    """v2.CenterCrop that refuses (as RandomCrop does) to pad an image smaller than the crop with black."""
    v2 = _v2()

    class StrictCenterCrop(v2.CenterCrop):
        def transform(self, inpt: Any, params: Dict[str, Any]) -> Any:
            height, width = v2.functional.get_size(inpt)
            if self.size[0] > height or self.size[1] > width:
                raise ValueError(
                    f"Required crop size {tuple(self.size)} is larger than input image size {(height, width)}"
                )
            return super().transform(inpt, params)

    StrictCenterCrop.__qualname__ = StrictCenterCrop.__name__  # pickled by name (DataLoader workers): see __getattr__
    return StrictCenterCrop


def __getattr__(name: str) -> Any:
    # made on first use, so importing this module does not import torchvision
    if name == "StrictCenterCrop":
        globals()[name] = _strict_center_crop()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _build_ops(specs: List[Dict[str, Any]], key: str) -> List[Tuple[str, Callable]]:
    """Each entry of the list ``key`` built, with the words that name it in errors (``data.train_transforms[0] (RandomCrop)``)."""
    v2, names = _v2(), _names()
    ops = []
    for index, spec in enumerate(specs):
        spec = dict(spec)
        name = spec.pop("name", None)
        if name not in names:
            hint = difflib.get_close_matches(str(name), names, n=1)
            fix = f"; did you mean '{hint[0]}'?" if hint else ""
            raise ConfigError(
                f"{key}[{index}]: unknown transform '{name}' (torchvision.transforms.v2 class names){fix}"
            )
        cls = __getattr__("StrictCenterCrop") if name == "CenterCrop" else getattr(v2, name)
        try:
            ops.append((f"{key}[{index}] ({name})", cls(**spec)))
        # what torchvision raises for arguments it does not take or values out of range
        except (
            TypeError,
            ValueError,
        ) as err:
            raise ConfigError(
                f"{key}[{index}] ({name}) refused its arguments {spec}: {first_line(err)}; fix them (see torchvision.transforms.v2.{name})"
            ) from None
    return ops


def build_transforms(
    specs: List[Dict[str, Any]], key: str = "data.*_transforms", pixels_first: bool = False
) -> Optional[Callable]:
    """The listed transforms (``key`` names their config list in errors), or None for an empty list;
    ``pixels_first``: see ``ConfiguredTransforms``."""
    if not specs:
        return None
    return ConfiguredTransforms(_v2().Compose([op for _, op in _build_ops(specs, key)]), key, pixels_first)


def _fake_input(input_size: Sequence[int]) -> Any:
    """A sample of ``input_size`` as the datasets give it to the transforms: an image ``[C, H, W]``, or a clip
    ``[C, T, H, W]`` as a video ``[T, C, H, W]``; values in [0, 1]."""
    from torchvision import tv_tensors

    if len(input_size) == 4:
        channels, frames, height, width = input_size
        return tv_tensors.Video(torch.rand(frames, channels, height, width))
    return tv_tensors.Image(torch.rand(*input_size))


def _enlarged(sample: Any, height: int, width: int) -> Any:
    """``sample`` with at least ``height`` x ``width`` pixels: the real data may be larger than ``model.input_size``."""
    from torchvision import tv_tensors

    shape = list(sample.shape)
    shape[-2:] = [max(shape[-2], height), max(shape[-1], width)]
    return tv_tensors.wrap(torch.rand(*shape), like=sample)


# what torch and torchvision raise for values they cannot use (a NaN angle, a zero std, a size of 0, a number as a function)
TRIAL_ERRORS = (TypeError, ValueError, RuntimeError, IndexError, ArithmeticError)


def _apply(label: str, op: Callable, sample: Any, input_size: Sequence[int]) -> Any:
    """``op(sample)``; a crop larger than the fake sample is tried again on a sample of the crop's size (the
    data may be larger than ``model.input_size``: its own size is checked when it is read); any other
    failure is a ConfigError naming the entry."""
    try:
        return op(sample)
    except TRIAL_ERRORS as err:
        match = (
            CROP_TOO_LARGE.search(str(err))
            if isinstance(err, ValueError) and isinstance(sample, torch.Tensor)
            else None
        )
        # this sample's own size (or the size its padding made): the real samples' sizes decide (ConfiguredTransforms)
        padded = match is not None and "padded" in str(err)
        if match is None or (not padded and tuple(sample.shape[-2:]) != (int(match.group(3)), int(match.group(4)))):
            raise _failed(label, input_size, err) from None
    try:
        return op(_enlarged(sample, int(match.group(1)), int(match.group(2))))
    except TRIAL_ERRORS as err:
        raise _failed(label, input_size, err) from None


def _failed(label: str, input_size: Sequence[int], err: Exception) -> ConfigError:
    return ConfigError(
        f"{label} fails on a sample of model.input_size={list(input_size)}: {type(err).__name__}: {first_line(err)}; fix its arguments or remove it"
    )


# the list runs this many times, each from its own seed: a random transform with bad values may fail on some draws only
TRIALS = 4


def _trial(ops: List[Tuple[str, Callable]], key: str, input_size: Sequence[int]) -> None:
    """One pass of the list over a fake sample; ConfigError naming the entry that fails, empties the sample,
    or leaves a value that is not a tensor at the end."""
    sample, made_by = _fake_input(input_size), ""
    for label, op in ops:
        out = _apply(label, op, sample, input_size)
        if isinstance(out, torch.Tensor) and 0 in out.shape:
            raise ConfigError(
                f"{label} turns a sample of model.input_size={list(input_size)} into an empty one of shape {list(out.shape)}; fix its arguments (sizes >= 1)"
            )
        made_by = label if isinstance(sample, torch.Tensor) and not isinstance(out, torch.Tensor) else made_by
        sample = out
    if not isinstance(sample, torch.Tensor):
        module = type(sample).__module__.split(".")[0]
        kind = type(sample).__name__ if module == "builtins" else f"{module}.{type(sample).__name__}"
        raise ConfigError(
            f"{made_by or key} leaves a {kind}, not a tensor, at the end of {key}: the loader batches tensors; "
            f"end the list with a transform that returns one (e.g. {{name: ToImage}}) or remove it"
        )


def check_transforms(specs: List[Dict[str, Any]], key: str, input_size: Optional[Sequence[int]]) -> None:
    """When the config is checked: the list ``key`` builds and, when ``model.input_size`` is one image's
    (or one clip's) shape, turns a fake sample of it into a non-empty tensor (the loader batches tensors)
    on each of ``TRIALS`` seeded draws; one ConfigError naming the entry otherwise. Training draws the same
    numbers with the check as without (``utils/data/trial.py``)."""
    if not specs:  # nothing to build: a run without transforms never imports torchvision's v2 (``_v2``)
        return
    ops = _build_ops(specs, key)
    if not input_size or len(input_size) not in (3, 4):
        return
    with drawing_nothing():
        for seed in range(TRIALS):
            # the CPU's only (forked); the same draws at every check: a config passes or fails alike each time
            torch.default_generator.manual_seed(seed)
            _trial(ops, key, input_size)
