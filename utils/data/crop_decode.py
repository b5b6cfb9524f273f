"""Decoding for the crop: a JPEG decoded at the size its first transform needs (``data.args.decode_for_crop``).

A training list that starts with ``RandomResizedCrop`` draws its box from the image's size, which the
JPEG's header gives before any decoding: the box is drawn by torchvision's own ``make_params`` on that
size (the same law, the same draws from the same generator as on the decoded image), then the image is
decoded at the smallest of libjpeg-turbo's DCT scales (1/8, 1/4, 1/2, else whole) at which the box still
holds the output size in each direction, and the box, scaled, goes through the crop's own kernel
(``resized_crop`` on uint8, as before); a ``RandomHorizontalFlip`` right after the crop is applied here too,
on its own draw. A list whose first transform is ``Resize`` (an evaluation list, or
``data.args.image_size``) decodes at the smallest scale that still covers the resize's output, and runs
its whole list on that. At the whole scale the pixels are those of the full path; at a reduced one they
differ by resampling only (the DCT's reduction instead of part of the resize; docs/data.md gives the
measured difference). 7/8 to 5/8 are left out: without SIMD they decode slower than the whole image.

Decoders: ``simplejpeg`` where installed (the ``jpeg`` extra: libjpeg-turbo decoding straight into an
array, about 1.6x Pillow's decode of the same file), else Pillow's ``draft``; both run libjpeg-turbo
with the same settings (accurate integer DCT, smooth chroma upsampling), so they give the same pixels.
Neither exposes libjpeg-turbo's decoding of some rows only (``jpeg_skip_scanlines``): rows outside the
crop are decoded too. Other files (not JPEG, CMYK, rotated by their EXIF orientation) take the full path
with the same draws.
"""

from __future__ import annotations

import io
from typing import Any, Callable, NamedTuple, Optional, Tuple

import numpy as np
import torch
from PIL import Image

from utils.data.bad_samples import BadFile
from utils.data.images import BAD_IMAGE, bad_file, decode_image, open_header, stored_values, to_channels

JPEG_START = b"\xff\xd8\xff"
REDUCTIONS = (8, 4, 2)  # libjpeg-turbo's reduced IDCTs with SIMD code, largest first
COLOURS = {"RGB": "RGB", "L": "GRAY"}  # the JPEG modes decoded here, as simplejpeg names them
PIL_FILTERS = {
    "bilinear": Image.BILINEAR,
    "bicubic": Image.BICUBIC,
}  # torchvision's antialiased resizes follow Pillow's
ORIENTATION = 0x0112  # the EXIF tag ImageOps.exif_transpose reads
FIX = "fix or remove the file"


def _simplejpeg() -> Any:
    try:
        import simplejpeg
    except ImportError:  # optional (the jpeg extra): Pillow's draft decodes the same pixels, slower
        return None
    return simplejpeg


class Decoded(NamedTuple):
    """An image's values (``[C, H, W]``, as ``read_pixels`` gives them), whether its first transform was applied,
    and its stored ``(height, width)`` where the values are not that size (decoded reduced; None: their own)."""

    values: torch.Tensor
    cropped: bool
    size: Optional[Tuple[int, int]] = None


class DecodeForCrop:
    """Reads an image's bytes for a list that starts with ``RandomResizedCrop`` (``crop``) or with a resize to
    ``size`` (``(height, width)``, or ``(shorter side,)``); ``rest``: what is left of the list after the crop."""

    def __init__(self, crop: Any, size: Tuple[int, ...], rest: Optional[Callable]) -> None:
        self.crop, self.size = crop, tuple(size)
        self.flip, self.rest = _leading_flip(rest) if crop is not None else (None, rest)
        self.simplejpeg = _simplejpeg()

    def read(self, data: bytes, where: str, channels: int) -> Decoded:
        """The image in ``data`` (``where`` names it in errors), cropped when the list starts with a crop and
        the file is a JPEG this reads; otherwise as ``read_pixels`` reads it (decoded whole but for a resize)."""
        what = f"image '{where}'"
        image = open_header(io.BytesIO(data), what, FIX)
        if not self._serves(data, image):
            whole = decode_image(io.BytesIO(data), what, FIX)
            return Decoded(to_channels(stored_values(whole, where), channels), False)
        height, width = image.size[1], image.size[0]
        if self.crop is None:
            array = self._decode(data, image, self._covering(height, width), what)
            return Decoded(to_channels(_chw(array), channels), False, (height, width))
        state = torch.get_rng_state()  # a file that fails after its draw: drawn again, as without this path
        params = self.crop.make_params([torch.zeros((), dtype=torch.uint8).expand(1, height, width)])
        reduction = (
            self._reduction(params["height"], params["width"], self.crop.size) if self._reduces(image, channels) else 1
        )
        try:
            array = self._decode(data, image, reduction, what)
        except BadFile:
            torch.set_rng_state(state)
            raise
        if reduction > 1:  # the box, scaled, to the output in one resampling (fractional edges kept)
            values = to_channels(self._resized(array, params, height, width), channels)
        else:  # the crop's own kernel (its transform, less the dispatch on input types)
            from torchvision.transforms.v2 import functional as F

            crop = self.crop
            values = to_channels(_chw(array), channels)
            values = F.resized_crop(
                values, **params, size=crop.size, interpolation=crop.interpolation, antialias=crop.antialias
            )
        return Decoded(self._flipped(values), True)

    def _flipped(self, values: torch.Tensor) -> torch.Tensor:
        """``values`` through the list's leading ``RandomHorizontalFlip`` (``flip``: its probability), by its draw."""
        if self.flip is None or torch.rand(1) >= self.flip:  # the flip's own test, on the same draw
            return values
        return values.flip(-1)

    def _reduces(self, image: Image.Image, channels: int) -> bool:
        """Whether the crop may decode reduced: Pillow's resize of 8-bit values with the crop's own filter."""
        eight_bit = channels == 3 or image.mode == "L"  # a colour image read as 1 channel is luma in floats
        return eight_bit and _filter(self.crop) in PIL_FILTERS and bool(self.crop.antialias)

    def _resized(self, array: np.ndarray, params: dict, height: int, width: int) -> torch.Tensor:
        """The box ``params`` of the whole image (``height`` x ``width``) out of its reduced decode ``array``,
        resized to the crop's size by Pillow, whose resize takes a box with fractional edges."""
        scale_y, scale_x = array.shape[0] / height, array.shape[1] / width
        top, left = params["top"] * scale_y, params["left"] * scale_x
        box = (left, top, left + params["width"] * scale_x, top + params["height"] * scale_y)
        resample = PIL_FILTERS[_filter(self.crop)]
        out_h, out_w = self.crop.size[0], self.crop.size[-1]
        pixels = Image.fromarray(array[..., 0] if array.shape[2] == 1 else array)
        return _chw(np.asarray(pixels.resize((out_w, out_h), resample, box=box)))

    @staticmethod
    def _serves(data: bytes, image: Image.Image) -> bool:
        if not data.startswith(JPEG_START) or image.format != "JPEG" or image.mode not in COLOURS:
            return False
        return "exif" not in image.info or image.getexif().get(ORIENTATION, 1) == 1

    @staticmethod
    def _reduction(height: int, width: int, size: Tuple[int, ...]) -> int:
        """The largest reduction at which a ``height`` x ``width`` region still holds ``size`` (1: none)."""
        need_h, need_w = (size[0], size[0]) if len(size) == 1 else size[:2]
        return next((k for k in REDUCTIONS if height // k >= need_h and width // k >= need_w), 1)

    def _covering(self, height: int, width: int) -> int:
        """The largest reduction whose image still covers the resize's output (its shorter side, or both sides)."""
        if len(self.size) == 1:
            return self._reduction(min(height, width), min(height, width), self.size)
        return self._reduction(height, width, self.size)

    def _decode(self, data: bytes, image: Image.Image, reduction: int, what: str) -> np.ndarray:
        """The JPEG ``data`` (opened as ``image``) decoded at 1/``reduction`` of its size: ``[H, W, C]`` uint8."""
        width, height = image.size
        try:
            if self.simplejpeg is not None:
                array = self.simplejpeg.decode_jpeg(
                    data, COLOURS[image.mode], min_height=-(-height // reduction), min_width=-(-width // reduction)
                )
            else:
                if reduction > 1:
                    image.draft(image.mode, (width // reduction, height // reduction))
                image.load()
                array = np.asarray(image)
        except BAD_IMAGE as err:
            raise bad_file(what, err, FIX) from err
        return array.reshape(array.shape[0], array.shape[1], -1)


def _leading_flip(rest: Optional[Any]) -> Tuple[Optional[float], Optional[Callable]]:
    """The probability of a ``RandomHorizontalFlip`` that ``rest`` (a ``ConfiguredTransforms`` or None) starts with,
    and ``rest`` less it; ``(None, rest)`` when it starts with anything else. The reader flips the crop itself: the
    list's machinery (wrapping, input checks, dispatch) cost about 5% of a 500x375 JPEG's time in a worker."""
    from torchvision.transforms.v2 import RandomHorizontalFlip

    from utils.data.transforms import ConfiguredTransforms

    if not isinstance(rest, ConfiguredTransforms) or type(rest.compose.transforms[0]) is not RandomHorizontalFlip:
        return None, rest
    return float(rest.compose.transforms[0].p), rest.without_first()


def _filter(crop: Any) -> str:
    """The crop's interpolation by name (torchvision keeps an ``InterpolationMode`` or its value)."""
    return str(getattr(crop.interpolation, "value", crop.interpolation))


def _chw(array: np.ndarray) -> torch.Tensor:
    """An 8-bit ``[H, W]`` or ``[H, W, C]`` array as ``[C, H, W]`` (a view, as ``stored_values`` gives it)."""
    array = array.reshape(array.shape[0], array.shape[1], -1)
    return torch.from_numpy(np.array(array, copy=not array.flags.writeable)).permute(2, 0, 1)


def crop_reader(transform: Optional[Callable], resize: Optional[Callable]) -> Optional[DecodeForCrop]:
    """The reader for a dataset's ``transform`` after its ``resize`` (``data.args.image_size``), or None when
    neither starts with a transform this serves: ``resize``, a leading ``Resize``, or a ``RandomResizedCrop``
    that the list runs on pixels (a training list: ``split_at_float``)."""
    from torchvision.transforms import v2

    from utils.data.transforms import ConfiguredTransforms, split_at_float

    if resize is not None:
        return _sized(resize)
    if not isinstance(transform, ConfiguredTransforms):
        return None
    first = transform.compose.transforms[0]
    if type(first) is v2.Resize:
        return _sized(first)
    if type(first) is v2.RandomResizedCrop and split_at_float(transform)[0] is not None:
        return DecodeForCrop(first, tuple(first.size), transform.without_first())
    return None


def _sized(resize: Any) -> Optional[DecodeForCrop]:
    """For a ``v2.Resize`` to a size (a ``max_size`` only makes its output smaller: still covered); None for
    one bounded by ``max_size`` alone, and for one that does not average (nearest, or no antialias), whose
    output a reduced decode would change by more than resampling."""
    size = getattr(resize, "size", None)
    averages = _filter(resize) in PIL_FILTERS and bool(getattr(resize, "antialias", True))
    return DecodeForCrop(None, tuple(int(s) for s in size), None) if size and averages else None
