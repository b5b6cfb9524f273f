"""Decoding for the crop (``data.args.decode_for_crop``, utils/data/crop_decode.py): the boxes and random draws
of torchvision's RandomResizedCrop, the full path's pixels where no DCT scale applies, a bounded resampling
difference where one does, both decoders alike, and the full path for files it does not serve."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from PIL import Image

from tests.data.test_images_as_stored import dataset, one_image_folder
from utils.data.bad_samples import BadFile
from utils.data.crop_decode import DecodeForCrop
from utils.data.images import decode_image, stored_values

CROP = "data.train_transforms=[{name: RandomResizedCrop, size: 24}, {name: RandomHorizontalFlip}]"


def _picture(height: int = 90, width: int = 120) -> np.ndarray:
    """Smooth gradients with some texture: a photograph's kind of content, where DCT scaling is meant."""
    y, x = np.mgrid[0:height, 0:width]
    noise = np.random.default_rng(0).integers(0, 24, (height, width))
    return np.stack([(x * 2 + 30 * np.sin(y / 5)) % 256, (y * 2.5) % 256, (x + y + noise) % 256], -1).astype(np.uint8)


def _jpeg(pixels: np.ndarray, **save) -> bytes:
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "JPEG", quality=90, **save)
    return out.getvalue()


def test_boxes_and_draws_are_torchvisions_and_pixels_differ_by_resampling_only():
    from torchvision import tv_tensors
    from torchvision.transforms import v2

    data = _jpeg(_picture())
    crop = v2.RandomResizedCrop(24, antialias=True)
    reader = DecodeForCrop(crop, (24, 24), None)
    whole = tv_tensors.Image(stored_values(decode_image(io.BytesIO(data), "x", "fix"), "x"))
    differences = {}
    for seed in range(40):
        torch.manual_seed(seed)
        fast = reader.read(data, "x", 3)
        after_fast = torch.get_rng_state()
        torch.manual_seed(seed)
        box = crop.make_params([whole])
        torch.manual_seed(seed)
        full = crop(whole)
        assert fast.cropped and torch.equal(after_fast, torch.get_rng_state())  # the same draws, no more
        reduction = reader._reduction(box["height"], box["width"], (24, 24))
        differences.setdefault(reduction, []).append((fast.values.float() - full.float()).abs().mean().item())
    assert set(differences) == {1, 2}, differences  # both cases drawn
    assert max(differences[1]) == 0.0  # no DCT scale: the full path's pixels
    assert max(differences[2]) < 2.0  # a reduced decode: resampling only (of 255)


def test_both_decoders_give_the_same_pixels_at_every_scale():
    simplejpeg = pytest.importorskip("simplejpeg")
    data = _jpeg(_picture(), subsampling=2)
    reader = DecodeForCrop(None, (8,), None)
    for reduction in (1, 2, 4, 8):
        reader.simplejpeg = simplejpeg
        fast = reader._decode(data, Image.open(io.BytesIO(data)), reduction, "x")
        reader.simplejpeg = None
        assert np.array_equal(fast, reader._decode(data, Image.open(io.BytesIO(data)), reduction, "x")), reduction


def test_other_files_and_the_key_off_take_the_full_path_with_the_same_draws(tmp_path):
    root = one_image_folder(tmp_path / "png", "a.png", Image.fromarray(_picture()))
    on, off = dataset(root, CROP), dataset(root, CROP, "data.args={decode_for_crop: false}")
    assert on.for_crop is not None and off.for_crop is None
    for seed in range(3):
        torch.manual_seed(seed)
        a = on[0][0]
        torch.manual_seed(seed)
        assert torch.equal(a, off[0][0])
    root = one_image_folder(tmp_path / "jpg", "a.jpg", Image.fromarray(_picture()), quality=90)
    on, off = dataset(root, CROP), dataset(root, CROP, "data.args={decode_for_crop: false}")
    torch.manual_seed(0)
    a = on[0][0]
    torch.manual_seed(0)
    assert (a - off[0][0]).abs().mean() < 2 / 255


@pytest.mark.parametrize("after", ["", ", {name: RandomVerticalFlip}"])
def test_the_flip_after_the_crop_is_the_lists_own(tmp_path, after):
    """The reader flips the crop itself (a list's leading RandomHorizontalFlip): the same draw, the same pixels,
    and what follows the flip still runs."""
    root = one_image_folder(tmp_path, "a.jpg", Image.fromarray(_picture()), quality=90)
    crops = CROP[:-1] + after + "]"
    on, off = dataset(root, crops), dataset(root, crops, "data.args={decode_for_crop: false}")
    assert on.for_crop.flip == 0.5 and (on.for_crop.rest is None) == (not after)
    flips = set()
    for seed in range(40):
        torch.manual_seed(seed)
        box = on.for_crop.crop.make_params([torch.zeros(1, 90, 120)])
        flips.add(bool(torch.rand(1) < 0.5))
        if on.for_crop._reduction(box["height"], box["width"], (24, 24)) > 1:
            continue  # a reduced decode: pixels differ by resampling (test above)
        torch.manual_seed(seed)
        fast, after_fast = on[0][0], torch.get_rng_state()
        torch.manual_seed(seed)
        assert torch.equal(fast, off[0][0]) and torch.equal(after_fast, torch.get_rng_state()), seed
    assert flips == {True, False}


def test_a_broken_jpeg_is_a_bad_file_and_its_draw_is_given_back():
    from torchvision.transforms import v2

    data = _jpeg(_picture())
    reader = DecodeForCrop(v2.RandomResizedCrop(8, antialias=True), (8, 8), None)
    torch.manual_seed(0)
    before = torch.get_rng_state()
    with pytest.raises(BadFile, match=r"cannot read image 'a\.jpg'"):
        reader.read(data[: len(data) // 3] + b"\x00" * 10, "a.jpg", 3)
    assert torch.equal(before, torch.get_rng_state())  # the next file draws what this one would have


def test_evaluation_resize_decodes_at_the_scale_that_covers_it(tmp_path):
    root = one_image_folder(tmp_path, "a.jpg", Image.fromarray(_picture(180, 240)), quality=90)
    resize = "data.eval_transforms=[{name: Resize, size: 40}, {name: CenterCrop, size: 40}]"
    fast, full = (
        dataset(root, resize, split="val"),
        dataset(root, resize, "data.args={decode_for_crop: false}", split="val"),
    )
    assert fast.for_crop._covering(180, 240) == 4  # 45 x 60 still covers a shorter side of 40
    a, b = fast[0][0], full[0][0]
    assert a.shape == b.shape == (3, 40, 40) and (a - b).abs().mean() < 2 / 255
    nearest = "data.eval_transforms=[{name: Resize, size: 40, interpolation: 0}]"  # no averaging: decoded whole
    assert dataset(root, nearest, split="val").for_crop is None


def test_predict_reads_a_jpeg_as_the_eval_split_does(tmp_path):
    from utils.data.predict_inputs import ImageFiles, PredictImages, Sizing

    root = one_image_folder(tmp_path, "a.jpg", Image.fromarray(_picture(180, 240)), quality=90)
    val = dataset(root, "data.args={image_size: 40}", split="val")
    files = ImageFiles([root / "val" / "a" / "a.jpg"], root)
    image, info = PredictImages(files, Sizing(channels=3, resize_first=(40, 40)), None, "stop", True)[0]
    assert torch.equal(image, val[0][0]) and info["size"] == [180, 240]  # its own size, not the decoded one
    whole, _ = PredictImages(files, Sizing(channels=3, resize_first=(40, 40)), None, "stop")[0]
    assert 0 < (whole - image).abs().mean() < 2 / 255
