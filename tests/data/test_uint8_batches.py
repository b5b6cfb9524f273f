"""8-bit batches (issue 42, item 2): an image folder whose transforms end on pixels gives uint8 items, and the
loader makes floats of whole batches before normalizing them, with the numbers of the per-image path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torch.utils.data import default_collate

from tests.data.test_images_as_stored import dataset, one_image_folder
from utils.config.load import load_config
from utils.data import build_dataset, build_train_loader
from utils.data.images import as_float
from utils.data.prefetch import Normalize

CROP = "data.train_transforms=[{name: RandomResizedCrop, size: 8}, {name: RandomHorizontalFlip}]"
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _folder(tmp_path):
    noise = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    return one_image_folder(tmp_path, "a.jpg", Image.fromarray(noise), quality=90)


def test_batches_of_uint8_give_the_float_paths_numbers(tmp_path):
    data = dataset(_folder(tmp_path), CROP)
    floats = []
    for seed in range(4):
        torch.manual_seed(seed)
        floats.append(data[0])
    assert data.batches_of_uint8()
    eight = []
    for seed in range(4):
        torch.manual_seed(seed)
        eight.append(data[0])
    assert all(x.dtype == torch.uint8 for x, _ in eight) and all(
        torch.equal(as_float(a), b) for (a, _), (b, _) in zip(eight, floats)
    )
    by_batch = Normalize(MEAN, STD, in_place=True, eight_bit=True)(default_collate(eight))
    per_image = Normalize(MEAN, STD, in_place=True)(default_collate(floats))
    assert by_batch[0].dtype == torch.float32 and torch.equal(by_batch[0], per_image[0])


def test_lists_that_end_on_floats_keep_float_items(tmp_path):
    jitter = "data.train_transforms=[{name: RandomResizedCrop, size: 8}, {name: ColorJitter, brightness: 0.5}]"
    data = dataset(_folder(tmp_path), jitter)
    assert not data.batches_of_uint8() and data[0][0].dtype == torch.float32


def test_the_train_loader_turns_8_bit_batches_into_normalized_floats(tmp_path):
    cfg = load_config(
        None,
        [
            "data.name=image_folder",
            f"data.root={_folder(tmp_path)}",
            CROP,
            "data.batch_size=1",
            "model.input_size=[3, 8, 8]",
            f"data.mean={MEAN}",
            f"data.std={STD}",
        ],
    ).data
    loader = build_train_loader(build_dataset(cfg, "train"), cfg, 0, 1, seed=0)
    assert loader.normalize.eight_bit
    (x, _), *_ = list(loader)
    assert x.dtype == torch.float32 and x.shape == (1, 3, 8, 8) and x.min() < 0  # normalized


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.cuda
def test_cuda_prefetch_makes_floats_of_8_bit_batches_on_the_gpu():
    from torch.utils.data import DataLoader

    from utils.data.prefetch import PrefetchLoader

    images = torch.randint(0, 256, (8, 3, 4, 4), dtype=torch.uint8)
    source = DataLoader(list(zip(images, range(8))), batch_size=4, pin_memory=True)
    loader = PrefetchLoader(source, "cuda", 2, torch.device("cuda", 0), MEAN, STD, eight_bit=True)
    on_cpu = Normalize(MEAN, STD, in_place=True, eight_bit=True)  # the thread prefetcher's conversion
    for (x, _), (expected, _) in zip(loader, source):
        assert x.is_cuda and x.dtype == torch.float32  # copied as uint8, made floats on the GPU
        assert torch.allclose(x.cpu(), on_cpu(expected), atol=1e-6)
