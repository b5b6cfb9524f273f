"""Training transforms on 8-bit images: the leading crops, resizes and flips of ``data.train_transforms``
run on uint8 before the float conversion (issue 31, item 7), giving torchvision's v2 recipe's numbers with
the same random draws; evaluation lists, float images and other transforms keep the float path."""

from __future__ import annotations

import numpy as np
import torch
from PIL import Image

from tests.data.test_images_as_stored import dataset, one_image_folder
from utils.data.transforms import build_transforms, split_at_float

CROP = "data.train_transforms=[{name: RandomResizedCrop, size: 8}, {name: RandomHorizontalFlip}]"


def _noise(tmp_path):
    noise = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    return noise, one_image_folder(tmp_path, "a.png", Image.fromarray(noise))


def test_training_crops_give_torchvisions_v2_recipe_with_the_same_draws(tmp_path):
    from torchvision.transforms import v2

    noise, root = _noise(tmp_path)
    recipe = v2.Compose(
        [
            v2.ToImage(),
            v2.RandomResizedCrop(8),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
        ]
    )
    data = dataset(root, CROP)
    for seed in range(4):
        torch.manual_seed(seed)
        ours = data[0][0]
        torch.manual_seed(seed)
        assert torch.equal(ours, recipe(Image.fromarray(noise)))


def test_evaluation_lists_keep_the_float_path(tmp_path):
    from torchvision.transforms import v2

    noise, root = _noise(tmp_path)
    floats = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Resize((8, 8), antialias=True)])
    got = dataset(root, "data.eval_transforms=[{name: Resize, size: [8, 8]}]", split="val")[0][0]
    assert torch.equal(got, floats(Image.fromarray(noise)))


def test_the_split_stops_at_the_first_transform_that_needs_floats():
    ops = [{"name": "RandomCrop", "size": 4}, {"name": "ColorJitter", "brightness": 0.5}, {"name": "Resize", "size": 4}]
    before, after = split_at_float(build_transforms(ops, "data.train_transforms", pixels_first=True))
    assert [type(op).__name__ for op in before.compose.transforms] == ["RandomCrop"]
    assert [type(op).__name__ for op in after.compose.transforms] == ["ColorJitter", "Resize"]
    # a padding crop that fills with a non-zero value would fill another value on uint8
    filled = build_transforms([{"name": "RandomCrop", "size": 4, "padding": 1, "fill": 0.5}], "k", pixels_first=True)
    assert split_at_float(filled)[0] is None
    # without pixels_first (evaluation) every transform runs on floats
    whole = build_transforms(ops, "data.eval_transforms")
    assert split_at_float(whole) == (None, whole)
