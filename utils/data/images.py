"""Image files as stored: every PIL mode to float tensors in [0, 1], at their real range.

The one reader of image files for every dataset (``read_pixels``; ``read_image`` gives
floats). PIL's modes:

- ``1`` (1 bit): 0 or 1; ``L`` (8-bit grey): /255; ``LA``/``La``: the grey, alpha dropped;
- ``RGB``, ``RGBA``, ``RGBX``, ``RGBa``: /255 per channel, alpha dropped; ``P``/``PA``
  (palette): its colours, as RGB; ``CMYK``, ``YCbCr``, ``LAB``, ``HSV``: PIL's RGB conversion;
- ``I;16``, ``I;16L``, ``I;16B``, ``I;16N`` (16-bit grey): /65535, every level kept;
- ``I`` (32-bit integer, how PIL may read 16-bit data): /65535 when every value is in
  0..65535; other values are refused (no silent clipping);
- ``F`` (32-bit float): as stored when every value is in [0, 1]; others (and NaN) are refused.

``channels=3`` repeats grey data into 3 equal channels; ``channels=1`` turns colour into
luma (0.299 R + 0.587 G + 0.114 B, PIL's weights, computed in float). EXIF orientation is
applied first. PIL reads 48-bit colour PNGs as 8-bit RGB: convert such files to 16-bit grey
or float TIFF to keep their precision.

Files are opened as the raster formats the datasets list (``RASTER_FORMATS``) and no other,
whatever their name: PIL picks a format by content, and some (EPS, run through Ghostscript
where it is installed) run programs; a file of another format is an unreadable image
(``UnidentifiedImageError``, handled as ``data.args.on_bad_sample`` says).
"""

from __future__ import annotations

import os
import warnings
from typing import BinaryIO, Tuple, Union

import numpy as np
import torch
from PIL import Image, ImageOps

from utils.data.bad_samples import BadFile
from utils.errors import ConfigError

# What a damaged or hostile file raises while PIL opens and decodes it: truncated or not an
# image (OSError, UnidentifiedImageError), broken chunks (SyntaxError, ValueError), and a
# decompression bomb (the warning is raised as an error while reading).
BAD_IMAGE = (OSError, SyntaxError, ValueError, Image.DecompressionBombError, Image.DecompressionBombWarning)

# PIL's names of the formats of the image files the datasets and predict read (.png .jpg .jpeg .bmp .ppm .pgm .tif .tiff .webp)
RASTER_FORMATS = ("PNG", "JPEG", "BMP", "PPM", "TIFF", "WEBP")
CHANNELS = (1, 3)
SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N")
GREY_8BIT = ("L", "LA", "La")
LUMA = (0.299, 0.587, 0.114)
PathLike = Union[str, os.PathLike]


def check_channels(channels: int, dataset: str) -> int:
    """``channels`` when it is one the readers make, else a ConfigError naming the dataset."""
    if channels not in CHANNELS:
        raise ConfigError(f"{dataset}: data.args.channels must be 1 (grey) or 3 (RGB), got {channels!r}")
    return channels


def open_image(path: PathLike, kind: str = "image") -> Image.Image:
    """The decoded image at ``path``, turned upright by its EXIF orientation.

    A file PIL cannot decode (truncated, not an image, a decompression bomb) or that is of another format
    than ``RASTER_FORMATS`` is a :class:`BadFile` naming ``kind`` and ``path``.
    """
    what, fix = f"{kind} '{path}'", "fix or remove the file"
    try:
        fh = open(path, "rb")
    except OSError as err:  # gone or unreadable: as bad as a file PIL cannot decode
        raise bad_file(what, err, fix) from err
    with fh:
        return decode_image(fh, what, fix)


def decode_image(fh: BinaryIO, what: str, fix: str) -> Image.Image:
    """The image in ``fh`` (a file, or a shard member's bytes), upright by its EXIF orientation: a file or a
    packed copy decode alike. ``BadFile`` naming ``what`` (e.g. ``image 'a/b.png'``) and ``fix`` when PIL cannot."""
    image = open_header(fh, what, fix)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image.load()
        ImageOps.exif_transpose(image, in_place=True)
        return image
    except BAD_IMAGE as err:
        raise bad_file(what, err, fix) from err


def import_plugins() -> None:
    """Pillow's readers of ``RASTER_FORMATS`` imported in this process. Pillow imports them at the first open; a
    loader's workers are forked again each epoch (``data.persistent_workers`` false) from a process that has
    not opened an image, so each worker imported them again every epoch: 10 modules, 40-240 ms of CPU a
    worker on the 2-core test machine, the cost of decoding 100-500 JPEGs."""
    Image.preinit()  # BMP, GIF, JPEG, PPM, PNG
    from PIL import TiffImagePlugin, WebPImagePlugin  # noqa: F401 - else the first TIFF or WebP imports every plugin


def open_header(fh: BinaryIO, what: str, fix: str) -> Image.Image:
    """The image in ``fh`` opened, not decoded: its format, mode, size and EXIF read from the header, a
    decompression bomb refused (``BadFile`` as ``decode_image`` says); ``load()`` decodes it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return Image.open(fh, formats=RASTER_FORMATS)  # by content, among these only
    except BAD_IMAGE as err:
        raise bad_file(what, err, fix) from err


def file_bytes(path: PathLike, what: str, fix: str) -> bytes:
    """The bytes of the file at ``path``; ``BadFile`` (``what``, ``fix``) when it is gone or unreadable."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as err:  # gone or unreadable: as bad as a file PIL cannot decode
        raise bad_file(what, err, fix) from err


def bad_file(what: str, err: Exception, fix: str) -> BadFile:
    return BadFile(
        f"cannot read {what} ({type(err).__name__}); {fix}", skipped=f"unreadable {what} ({type(err).__name__}: {err})"
    )


def _in_range(values: np.ndarray, low: float, high: float) -> Tuple[bool, str]:
    finite = bool(np.isfinite(values).all())
    if not finite:
        return False, "NaN or infinite values"
    lo, hi = (values.min(), values.max()) if values.size else (low, high)
    return bool(low <= lo and hi <= high), f"values from {lo:g} to {hi:g}"


def stored_values(image: Image.Image, path: PathLike) -> torch.Tensor:
    """``[C, H, W]`` with C = 1 (grey modes) or 3 (colour modes), by the module's rule: uint8 for
    8-bit data (resizing uint8 is faster, and ``as_float`` scales it later), else float32 in [0, 1]."""
    mode = image.mode
    if mode == "1":
        return torch.from_numpy(np.array(image, dtype=np.uint8) * np.uint8(255))[None]
    if mode in SIXTEEN_BIT:
        return torch.from_numpy(np.array(image).astype(np.int32))[None].float().mul_(1.0 / 65535)
    if mode in ("I", "F"):
        values = np.array(image)
        low, high = (0, 65535) if mode == "I" else (0, 1)
        ok, found = _in_range(values, low, high)
        if not ok:
            what, fix = (
                ("32-bit integer", "save it as 16-bit, or as float scaled to [0, 1]")
                if mode == "I"
                else ("32-bit float", "save it scaled to [0, 1], or as 8- or 16-bit integers")
            )
            raise BadFile(
                f"image '{path}' is {what} (PIL mode {mode}) with {found}, outside the {low}..{high} it is read from; {fix}"
            )
        tensor = torch.from_numpy(values.astype(np.float32))[None]
        return tensor.mul_(1.0 / 65535) if mode == "I" else tensor
    eight_bit = np.array(image if mode in ("L", "RGB") else image.convert("L" if mode in GREY_8BIT else "RGB"))
    return torch.from_numpy(eight_bit[..., None] if eight_bit.ndim == 2 else eight_bit).permute(2, 0, 1)


def as_float(values: torch.Tensor) -> torch.Tensor:
    """uint8 values as float32 in [0, 1] (torchvision's scaling, so results match ``v2.ToDtype``); floats as they are."""
    return values.float().mul_(1.0 / 255) if values.dtype == torch.uint8 else values


def from_uint8(array: np.ndarray) -> torch.Tensor:
    """An 8-bit ``[H, W]`` or ``[H, W, C]`` array as ``[C, H, W]`` float32 in [0, 1]."""
    array = array[..., None] if array.ndim == 2 else array
    return as_float(torch.from_numpy(np.ascontiguousarray(array)).permute(2, 0, 1))


def to_channels(values: torch.Tensor, channels: int) -> torch.Tensor:
    """``[C, H, W]`` as ``channels`` channels: grey repeated, or colour as luma (then float)."""
    if values.shape[0] == channels:
        return values
    if channels == 3:
        return values.expand(3, -1, -1).contiguous()
    weights = torch.tensor(LUMA, dtype=torch.float32)[:, None, None]
    return (as_float(values) * weights).sum(0, keepdim=True)


def read_pixels(path: PathLike, channels: int = 3) -> torch.Tensor:
    """The image file at ``path`` as ``[channels, H, W]``: uint8 for 8-bit data, else float32 in [0, 1].

    The one reader of image files; ``as_float`` (or ``read_image``) gives [0, 1] floats.
    """
    return to_channels(stored_values(open_image(path), path), channels)


def read_image(path: PathLike, channels: int = 3) -> torch.Tensor:
    """The image file at ``path`` as ``[channels, H, W]`` float32 in [0, 1] (see the module doc)."""
    return as_float(read_pixels(path, channels))
