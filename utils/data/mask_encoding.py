"""Saliency masks as stored: the encoding is detected and turned into values in [0, 1], or refused.

One rule for the datasets' targets and the ``sod`` metric's ground truth, so a mask
scores the same whichever way it was saved. On the grey levels of a mask:

- one level, or two with the lower one 0 (0/255, 0/1, 0/65535, boolean mode ``1``,
  0/128 ...): binary, every nonzero pixel is the object (1);
- two levels, neither 0: refused (which one is the object?);
- more levels (soft masks, anti-aliased edges): divided by the smallest of 1, 255 and
  65535 that holds the largest level; refused when the largest level is below half of
  that range (label indices such as 0, 1, 2 are no saliency), negative, NaN or above 65535.

Colour masks (RGB, and palette ``P`` masks through their palette) are grey when
R = G = B everywhere, binary when they hold one colour on black (or one colour), and
refused, listing their colours, otherwise. An alpha channel must be opaque.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from PIL import Image

from utils.data.bad_samples import BadFile
from utils.data.images import SIXTEEN_BIT, PathLike, open_image
from utils.errors import name_list

SCALES = (1.0, 255.0, 65535.0)
GREY_MODES = ("1", "L", "I", "F", *SIXTEEN_BIT)
ALPHA_MODES = ("LA", "La", "PA", "RGBA", "RGBa")
FIX = "save it as grey with 0 for the background and 255 for the object (soft values between)"


def _levels(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values; a histogram for 8- and 16-bit data (far faster than sorting)."""
    if values.dtype.kind in "ui" and values.size and 0 <= values.min() and values.max() <= 65535:
        return np.flatnonzero(np.bincount(values.ravel()))
    return np.unique(values)


def _shown(levels: Sequence[Any]) -> str:
    return name_list([f"{float(v):g}" for v in levels], show=6)


def mask_values(values: Any, name: str) -> np.ndarray:
    """A grey mask ``[H, W]`` of any dtype as float32 in [0, 1] by the module's rule, or a BadFile."""
    values = np.asarray(values)
    values = values.view(np.uint8) if values.dtype == bool else values
    levels = _levels(values)
    if levels.size and not np.isfinite(levels.astype(np.float64)).all():
        raise BadFile(f"mask '{name}' holds NaN or infinite values; {FIX}")
    if levels.size and levels[0] < 0:
        raise BadFile(f"mask '{name}' holds negative values ({_shown(levels[:3])} ...); {FIX}")
    if levels.size <= 2 and (levels.size < 2 or levels[0] == 0):
        return (values > 0).astype(np.float32)
    if levels.size == 2:
        raise BadFile(f"mask '{name}' holds two values, {_shown(levels)}, and neither is 0 (the background); {FIX}")
    top = float(levels[-1])
    scale = next((s for s in SCALES if top <= s), None)
    if scale is None or top < scale / 2:
        why = (
            "above 65535"
            if scale is None
            else f"the largest is below half of the range 0..{scale:g} it falls in (label indices?)"
        )
        raise BadFile(f"mask '{name}' holds the values {_shown(levels)}: {why}; {FIX}")
    return (values.astype(np.float64) / scale).astype(np.float32)


def colour_mask_values(rgb: np.ndarray, name: str) -> np.ndarray:
    """An ``[H, W, 3]`` uint8 colour mask as float32 in [0, 1]: grey, or one colour on black."""
    red, green, blue = (rgb[..., i] for i in range(3))
    if np.array_equal(red, green) and np.array_equal(green, blue):
        return mask_values(red, name)
    packed = (red.astype(np.int32) << 16) | (green.astype(np.int32) << 8) | blue
    colours = np.unique(packed)
    if colours.size == 1 or (colours.size == 2 and colours[0] == 0):
        return (packed > 0).astype(np.float32)
    shown = name_list([(int(c) >> 16, (int(c) >> 8) & 255, int(c) & 255) for c in colours], show=4)
    raise BadFile(
        f"mask '{name}' holds {colours.size} colours ({shown}); a saliency mask is grey, or one colour on black: {FIX}"
    )


def image_mask_values(image: Image.Image, name: str) -> np.ndarray:
    """A decoded mask image of any PIL mode as float32 ``[H, W]`` in [0, 1], or a BadFile."""
    if image.mode in ALPHA_MODES or "transparency" in image.info:
        rgba = image.convert("RGBA")
        if (np.array(rgba.getchannel("A")) != 255).any():
            raise BadFile(f"mask '{name}' has transparent pixels; {FIX}, without an alpha channel")
        image = rgba.convert("RGB")
    if image.mode in GREY_MODES:
        return mask_values(np.array(image), name)
    return colour_mask_values(np.array(image.convert("RGB")), name)


def read_mask(path: PathLike) -> np.ndarray:
    """The mask file at ``path`` as float32 ``[H, W]`` in [0, 1] (see the module doc)."""
    return image_mask_values(open_image(path, "mask"), str(path))
