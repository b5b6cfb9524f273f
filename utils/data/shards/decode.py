"""Stored member bytes to the values the folder datasets read from their files.

Images decode as ``utils/data/images.py`` reads a file (the same formats, EXIF
orientation, stored range), masks as ``utils/data/mask_encoding.py`` does, so a packed
copy gives the same inputs as its folder. ``.npy`` members load with
``allow_pickle=False``: no code runs.
"""

from __future__ import annotations

import io

import numpy as np
import torch
from PIL import Image

from utils.data.bad_samples import BadFile
from utils.data.images import decode_image, stored_values, to_channels
from utils.data.mask_encoding import image_mask_values


def open_bytes(data: bytes, where: str, kind: str = "image") -> Image.Image:
    """The decoded image in ``data`` (``where`` names it in errors), as ``open_image`` decodes a file."""
    return decode_image(io.BytesIO(data), f"{kind} '{where}'", "fix the original file and pack again")


def pixels(data: bytes, ext: str, where: str, channels: int) -> torch.Tensor:
    """An image member (of extension ``ext``) as ``read_pixels`` gives a file: ``[channels, H, W]``, uint8 for
    8-bit data; an in-memory dataset's ``.npy`` tensor as it was."""
    if ext == "npy":
        return load_npy(data, where)
    return to_channels(stored_values(open_bytes(data, where), where), channels)


def mask(data: bytes, where: str) -> np.ndarray:
    """A mask member as float32 ``[H, W]`` in [0, 1] (``read_mask``)."""
    return image_mask_values(open_bytes(data, where, "mask"), where)


def load_npy(data: bytes, where: str) -> torch.Tensor:
    """An in-memory sample stored by ``--mode pack`` (``numpy.save``), as the tensor it was."""
    try:
        return torch.from_numpy(np.load(io.BytesIO(data), allow_pickle=False))
    except ValueError as err:
        raise BadFile(f"cannot read array '{where}' ({err}); pack the data again") from err
