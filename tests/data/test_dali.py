"""DALI loader, its CPU pipelines (device_id=None, no GPU needed): shapes, labels, disjoint slices, normalization."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image

from utils.config.load import load_config
from utils.data import build_dataset, build_eval_loader, build_train_loader
from utils.errors import ConfigError

NO_WHEEL = "DALI is not installed: the test extra installs it where it has wheels (Linux on x86_64, aarch64)"


@pytest.fixture
def image_root(tmp_path):
    rng = np.random.default_rng(0)
    for split, count in (("train", 6), ("val", 5)):
        for label, cls in enumerate(("cat", "dog")):
            folder = tmp_path / split / cls
            folder.mkdir(parents=True)
            for i in range(count):
                pixels = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
                pixels[..., 0] = 40 + 150 * label  # the class shows in the red channel
                Image.fromarray(pixels).save(folder / f"{i}.png")
    return tmp_path


def _cfg(root, *extra):
    return load_config(
        None,
        [
            "data.name=image_folder",
            f"data.root={root}",
            "data.args={image_size: 8}",
            "data.loader=dali",
            "data.batch_size=4",
            "model.input_size=[3, 8, 8]",  # DALI decodes to RGB
            *extra,
        ],
    )


def test_missing_dali_names_the_install_command(image_root, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_dali(name, *args, **kwargs):
        if name.startswith("nvidia.dali") or name == "nvidia":
            raise ImportError("No module named 'nvidia.dali'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_dali)
    cfg = _cfg(image_root)
    with pytest.raises(ConfigError, match=r'pip install -e "\.\[dali\]"'):
        build_train_loader(build_dataset(cfg.data, "train"), cfg.data, 0, 1, seed=0)


def test_dali_needs_image_folder_data():
    pytest.importorskip("nvidia.dali", reason=NO_WHEEL)
    cfg = load_config(None, ["data.loader=dali"])
    with pytest.raises(ConfigError, match="reads image_folder data"):
        build_train_loader(build_dataset(cfg.data, "train"), cfg.data, 0, 1, seed=0)


def test_dali_eval_slices_are_disjoint_and_cover_the_split(image_root):
    pytest.importorskip("nvidia.dali", reason=NO_WHEEL)
    cfg = _cfg(image_root, "data.mean=[0.5, 0.5, 0.5]", "data.std=[0.5, 0.5, 0.5]")
    dataset = build_dataset(cfg.data, "val")
    labels, red = [], []
    for rank in range(2):
        loader = build_eval_loader(dataset, cfg.data, rank, 2)
        batches = list(loader)
        assert len(batches) == len(loader)
        for x, y in batches:
            assert x.shape[1:] == (3, 8, 8) and x.dtype == torch.float32 and y.dtype == torch.int64
            assert x.min() >= -1.0 - 1e-5 and x.max() <= 1.0 + 1e-5  # normalized once, not twice
            labels += y.tolist()
            red += x[:, 0].mean(dim=(1, 2)).tolist()
    assert sorted(labels) == [0] * 5 + [1] * 5  # every sample exactly once over the two slices
    for label, value in zip(labels, red):  # labels follow the sorted class folders, as in torchvision
        expected = (40 + 150 * label) / 255 * 2 - 1
        assert abs(value - expected) < 0.05


def test_dali_train_loader_drops_the_last_partial_batch_and_runs_epochs(image_root):
    pytest.importorskip("nvidia.dali", reason=NO_WHEEL)
    cfg = _cfg(image_root)
    dataset = build_dataset(cfg.data, "train")
    loader = build_train_loader(dataset, cfg.data, 0, 1, seed=0)
    assert len(loader) == 12 // 4
    for epoch in range(2):
        loader.sampler.set_epoch(epoch)
        batches = list(loader)
        assert len(batches) == 3 and all(x.shape == (4, 3, 8, 8) for x, _ in batches)


def test_dali_steps_hold_the_torch_loaders_samples_and_a_resume_skips_by_index(tmp_path):
    pytest.importorskip("nvidia.dali", reason=NO_WHEEL)
    for i in range(12):  # each image one flat grey, 20 * (its index + 1): any crop or resize keeps it
        folder = tmp_path / "train" / ("cat" if i < 6 else "dog")
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((12, 16, 3), 20 * (i + 1), dtype=np.uint8)).save(folder / f"{i:02d}.png")

    def steps(loader, epoch, skip=0):
        loader.sampler.set_epoch(epoch)
        loader.sampler.skip_first(skip)
        return [(x[:, 0].mean(dim=(1, 2)) * 255 / 20).round().long().tolist() for x, _ in loader]

    for rank in range(2):
        torch_cfg = _cfg(tmp_path, "data.loader=torch").data
        dali, plain = (
            build_train_loader(build_dataset(cfg, "train"), cfg, rank, 2, seed=3)
            for cfg in (_cfg(tmp_path).data, torch_cfg)
        )
        for epoch in range(2):
            assert steps(dali, epoch) == steps(plain, epoch)
        assert steps(dali, 1, skip=4) == steps(plain, 1)[1:]  # a resume after one step: the rest of that epoch
