"""Build datasets and loaders from the ``data`` config section."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from torch.utils.data import DataLoader, Dataset, DistributedSampler

from utils.config import DataConfig
from utils.data.samplers import ShardSampler
from utils.data.transforms import build_transforms
from utils.registry import DATASETS


def build_dataset(cfg: DataConfig, split: str) -> Dataset:
    """The ``split`` of the configured dataset, with the train or eval transforms."""
    specs = cfg.train_transforms if split == "train" else cfg.eval_transforms
    transform: Optional[Callable] = build_transforms(specs)
    dataset = DATASETS.build(cfg.name, split=split, root=cfg.root, transform=transform, **cfg.args)
    if len(dataset) == 0:
        raise ValueError(f"dataset '{cfg.name}' split '{split}' is empty; check data.root={cfg.root!r}")
    return dataset


def _loader_options(dataset: Dataset, cfg: DataConfig) -> Dict[str, Any]:
    # A dataset whose items do not stack with default_collate (e.g. masks kept at their
    # original, differing sizes) batches them itself through a ``collate_fn`` attribute.
    options: Dict[str, Any] = {"num_workers": cfg.num_workers, "pin_memory": cfg.pin_memory, "collate_fn": getattr(dataset, "collate_fn", None)}
    if cfg.num_workers > 0:
        options["persistent_workers"] = cfg.persistent_workers
        if cfg.prefetch_factor is not None:
            options["prefetch_factor"] = cfg.prefetch_factor
    return options


def build_train_loader(dataset: Dataset, cfg: DataConfig, rank: int, world_size: int, seed: int) -> DataLoader:
    """Shuffled per epoch by a seeded ``DistributedSampler`` (also with one process,
    so the order depends only on seed and epoch: reproducible and resumable)."""
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed)
    drop_last = cfg.drop_last and len(sampler) >= cfg.batch_size
    return DataLoader(dataset, batch_size=cfg.batch_size, sampler=sampler, drop_last=drop_last, **_loader_options(dataset, cfg))


def build_eval_loader(dataset: Dataset, cfg: DataConfig, rank: int, world_size: int) -> DataLoader:
    """Disjoint, unpadded shards: every sample is evaluated exactly once over all ranks."""
    sampler = ShardSampler(len(dataset), rank, world_size)
    batch_size = cfg.eval_batch_size or cfg.batch_size
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=False, **_loader_options(dataset, cfg))
