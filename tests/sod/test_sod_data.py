"""SOD data: reproducible synthetic scenes, the image/mask folder layout, joint transforms,
batching with original-size masks, multi-scale batches and clear errors."""

import numpy as np
import pytest
import torch
from PIL import Image

from utils.config.schema import DataConfig
from utils.data import build_dataset, build_eval_loader, build_train_loader
from utils.data.datasets.shapes_sod import main as write_shapes
from utils.data.datasets.shapes_sod import render_scene
from utils.data.masks import MaskBatchCollate
from utils.errors import ConfigError, DataError
from utils.registry import DATASETS


def test_scenes_are_reproducible_per_index_and_splits_differ():
    image, mask = render_scene(0, "train", 5)
    again_image, again_mask = render_scene(0, "train", 5)
    assert np.array_equal(image, again_image) and np.array_equal(mask, again_mask)
    assert set(np.unique(mask)) == {0, 255} and image.dtype == np.uint8 and image.shape[:2] == mask.shape
    fresh = DATASETS.build("shapes_sod", split="train", root=None, transform=None)
    assert np.array_equal(fresh.scene(5)[1], mask)  # index 5 alone, without drawing 0-4 first
    others = [render_scene(0, split, 5)[0] for split in ("val", "test")] + [render_scene(1, "train", 5)[0]]
    assert all(o.shape != image.shape or not np.array_equal(o, image) for o in others)
    sizes = {render_scene(0, "test", i)[1].shape for i in range(10)}
    assert len(sizes) > 5 and all(48 <= s <= 80 for size in sizes for s in size)
    # the shapes stand out: the mean colour inside the mask differs from the outside
    inside, outside = (
        image[mask > 0].astype(float).std(axis=1).mean(),
        image[mask == 0].astype(float).std(axis=1).mean(),
    )
    assert inside > 2 * outside  # saturated shapes vs a low-saturation background


def test_script_writes_the_folder_layout_and_image_mask_folder_reads_it_back(tmp_path):
    write_shapes(["--out", str(tmp_path), "--split", "train", "test", "--count", "5"])
    assert len(list((tmp_path / "test" / "Image").glob("*.png"))) == 5
    cfg = DataConfig(name="image_mask_folder", root=str(tmp_path), args={"size": 24})
    disk = build_dataset(cfg, "test")
    memory = DATASETS.build("shapes_sod", split="test", root=None, transform=None, size=24)
    assert len(disk) == 5
    for i in range(5):
        (x_disk, t_disk), (x_mem, t_mem) = disk[i], memory[i]
        assert t_disk["name"] == t_mem["name"] == f"test_{i:05d}"
        assert np.array_equal(t_disk["original"], t_mem["original"])  # PNG is lossless
        assert torch.equal(x_disk, x_mem) and torch.equal(t_disk["mask"], t_mem["mask"])
        assert x_disk.shape == (3, 24, 24) and t_disk["mask"].shape == (1, 24, 24)
    assert "original" not in build_dataset(cfg, "train")[0][1]  # training needs no originals

    loader = build_eval_loader(disk, DataConfig(batch_size=2), rank=0, world_size=1)
    images, targets = next(iter(loader))
    assert images.shape == (2, 3, 24, 24) and targets["mask"].shape == (2, 1, 24, 24)
    assert [o.shape for o in targets["original"]] == [t["original"].shape for _, t in (disk[0], disk[1])]
    assert targets["name"] == ["test_00000", "test_00001"]


def test_config_transforms_move_image_and_mask_together(tmp_path):
    """Images whose red channel is the mask: after random crops and flips it still is."""
    for folder in ("Image", "Mask"):
        (tmp_path / "train" / folder).mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(4):
        mask = ((rng.random((20, 26)) > 0.5) * 255).astype(np.uint8)
        image = np.stack([mask, rng.integers(0, 256, (20, 26), dtype=np.uint8), np.zeros_like(mask)], axis=-1)
        Image.fromarray(image).save(tmp_path / "train" / "Image" / f"{i}.png")
        Image.fromarray(mask).save(tmp_path / "train" / "Mask" / f"{i}.png")
    transforms = [{"name": "RandomCrop", "size": 12}, {"name": "RandomHorizontalFlip"}, {"name": "RandomVerticalFlip"}]
    cfg = DataConfig(name="image_mask_folder", root=str(tmp_path), args={"size": None}, train_transforms=transforms)
    dataset = build_dataset(cfg, "train")
    torch.manual_seed(0)
    crops = set()
    for _ in range(5):
        for i in range(len(dataset)):
            image, target = dataset[i]
            assert image.shape == (3, 12, 12)
            assert torch.equal(image[0], target["mask"][0])
            crops.add(image[1].sum().item())
    assert len(crops) > len(dataset)  # the crops really were random


def test_missing_masks_and_images_are_listed(tmp_path):
    for folder in ("Image", "Mask"):
        (tmp_path / "DUTS-TR" / folder).mkdir(parents=True)
    blank = Image.new("L", (4, 4))
    for stem in ("a", "b", "c"):
        blank.convert("RGB").save(tmp_path / "DUTS-TR" / "Image" / f"{stem}.jpg")
    for stem in ("b", "c", "z"):
        blank.save(tmp_path / "DUTS-TR" / "Mask" / f"{stem}.png")
    args = {"root": str(tmp_path), "transform": None, "splits": {"train": "DUTS-TR"}}
    with pytest.raises(DataError) as err:
        DATASETS.build("image_mask_folder", split="train", **args)
    message = str(err.value)
    assert "have no mask" in message and ": a;" in message and "have no image" in message and ": z;" in message
    assert str(tmp_path / "DUTS-TR" / "Image") in message
    (tmp_path / "DUTS-TR" / "Image" / "z.jpg").write_bytes((tmp_path / "DUTS-TR" / "Image" / "a.jpg").read_bytes())
    (tmp_path / "DUTS-TR" / "Mask" / "a.png").write_bytes((tmp_path / "DUTS-TR" / "Mask" / "b.png").read_bytes())
    assert len(DATASETS.build("image_mask_folder", split="train", **args)) == 4
    with pytest.raises(DataError, match="DUTS-TE"):
        DATASETS.build("image_mask_folder", split="test", **{**args, "splits": {"test": "DUTS-TE"}})
    with pytest.raises(ConfigError, match="no folder"):
        DATASETS.build("image_mask_folder", split="extra", **args)


def test_multi_scale_batches_share_one_random_size():
    dataset = DATASETS.build(
        "shapes_sod", split="train", root=None, transform=None, size=32, multi_scale=[0.5, 1.0, 1.5], size_divisor=8
    )
    loader = build_train_loader(dataset, DataConfig(batch_size=4), rank=0, world_size=1, seed=0)
    torch.manual_seed(0)
    sizes = set()
    for step, (images, targets) in enumerate(loader):
        assert images.shape[-2:] == targets["mask"].shape[-2:] and images.shape[-1] % 8 == 0
        assert set(targets["mask"].unique().tolist()) <= {0.0, 1.0}
        sizes.add(images.shape[-1])
        if step == 15:
            break
    assert sizes == {16, 32, 48}
    with pytest.raises(ConfigError, match="multi_scale"):
        MaskBatchCollate([0.0, 1.0])


def test_duts_config_reads_the_downloaded_layout(tmp_path):
    """DUTS ships DUTS-TE/DUTS-TE-Image and DUTS-TE/DUTS-TE-Mask: ``{folder}`` names them."""
    from utils.config.load import load_config
    from utils.data.datasets.shapes_sod import write_split

    (tmp_path / "DUTS-TE").mkdir()
    write_split(tmp_path / "tmp", "test", 3, image_dir="DUTS-TE-Image", mask_dir="DUTS-TE-Mask")
    (tmp_path / "tmp" / "test").rename(tmp_path / "DUTS-TE" / "x")
    for sub in ("DUTS-TE-Image", "DUTS-TE-Mask"):
        (tmp_path / "DUTS-TE" / "x" / sub).rename(tmp_path / "DUTS-TE" / sub)
    cfg = load_config("configs/minet_resnet50_duts.yaml", [f"data.root={tmp_path}"])
    dataset = build_dataset(cfg.data, "test")
    image, target = dataset[0]
    assert len(dataset) == 3 and image.shape == (3, 320, 320) and target["original"].ndim == 2
