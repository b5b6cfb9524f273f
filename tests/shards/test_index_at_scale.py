"""A pack of 100,000 samples: packed by two processes, its index mapped and checked whole, read through image_folder,
with nothing per sample kept in Python objects (the design's rule for data at scale)."""

from __future__ import annotations

import hashlib
import tracemalloc

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset

from utils.config.schema import DataConfig
from utils.data import build_dataset
from utils.data.identity import data_identity
from utils.data.shards.pack_split import SplitJob, pack_split
from utils.data.shards.sources import PackSource

pytestmark = pytest.mark.slow  # packs 100,000 samples: about 10 s

COUNT = 100_000


class Tiny(Dataset):
    """An in-memory dataset of ``COUNT`` one-pixel images in 10 classes (stored as ``.npy`` by pack)."""

    classes = [str(k) for k in range(10)]

    def __len__(self) -> int:
        return COUNT

    def __getitem__(self, at: int):
        return torch.full((1, 1, 1), at % 251, dtype=torch.uint8), at % 10


def test_a_pack_of_100k_samples_is_mapped_checked_and_read_without_per_sample_objects(tmp_path):
    header, _ = pack_split(SplitJob(PackSource(Tiny(), "tiny"), tmp_path / "train"), 4 << 20, 2, True, False)
    assert header.count == COUNT and len(header.shards) > 10
    config = DataConfig(name="image_folder", root=str(tmp_path))
    build_dataset(config, "train")  # the modules it imports (torchvision) are not the index's cost
    tracemalloc.start()
    dataset = build_dataset(config, "train")
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # the index is mapped: what the process allocates is a few numpy arrays, not an object per sample
    assert held < 16 * COUNT and peak < 40 * COUNT, (held, peak)  # a str per key alone would be 60 bytes
    assert len(dataset) == COUNT and dataset.classes == Tiny.classes
    keys = "".join(f"{k}\n" for k in range(COUNT)).encode()
    assert data_identity(dataset)["fingerprint"] == hashlib.sha256(keys).hexdigest()[:16]
    for at in (0, 12_345, COUNT - 1):
        image, label = dataset[at]
        assert label == at % 10 and int(image.reshape(-1)[0]) == at % 251
    assert np.array_equal(np.asarray(dataset.labels[:20]), np.arange(20) % 10)
