"""Build datasets and loaders from the ``data`` config section."""

from __future__ import annotations

import dataclasses
import inspect
import logging
from typing import Any, Callable, Dict, Optional, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from utils.config.schema import DataConfig
from utils.data.images import import_plugins
from utils.data.prefetch import PrefetchLoader, collates_new_tensors, resolve_mode
from utils.data.samplers import GlobalBatchSampler, ResumableSampler, SliceSampler
from utils.data.transforms import build_transforms
from utils.errors import ConfigError, DataError
from utils.registry import DATASETS

log = logging.getLogger(__name__)


def build_dataset(cfg: DataConfig, split: str, classes: Optional[Sequence[Any]] = None) -> Dataset:
    """The ``split`` of the configured dataset, with the train or eval transforms.

    ``classes`` (the train split's class list, or the one a checkpoint saved) is
    passed to datasets that take a ``classes`` argument, unless ``data.args``
    gives one: every split then labels a class with the same index. The ``test``
    split is the one ``data.test_split`` names.
    """
    if split == "train":
        transform: Optional[Callable] = build_transforms(
            cfg.train_transforms, "data.train_transforms", pixels_first=True
        )
    else:
        transform = build_transforms(cfg.eval_transforms, "data.eval_transforms")
    split = cfg.test_split if split == "test" else split
    args = dict(cfg.args)
    if (
        classes is not None
        and "classes" not in args
        and "classes" in inspect.signature(DATASETS.get(cfg.name)).parameters
    ):
        args["classes"] = list(classes)
    dataset = DATASETS.build(cfg.name, split=split, root=cfg.root, transform=transform, **args)
    if len(dataset) == 0:
        raise DataError(f"dataset '{cfg.name}' split '{split}' is empty; check data.root={cfg.root!r}")
    return dataset


def check_data_folders(cfg: DataConfig) -> None:
    """The folders the configured dataset would write into (the shard cache), checked before a run folder is made:
    a dataset names them with a static ``check_folders(root, args)`` that raises a UserError."""
    check = getattr(DATASETS.get(cfg.name), "check_folders", None)
    if check is not None:
        check(cfg.root, dict(cfg.args))


def with_process_batch(cfg: DataConfig, world_size: int) -> DataConfig:
    """``cfg`` with ``batch_size`` derived from ``data.global_batch_size`` and the world size (``cfg`` itself when unset)."""
    total = cfg.global_batch_size
    if total is None:
        return cfg
    if total % world_size:
        sizes = [w for w in range(1, total + 1) if total % w == 0]
        raise ConfigError(
            f"data.global_batch_size={total} cannot be split over {world_size} processes; run with one of {sizes} processes, "
            f"or set data.global_batch_size to a multiple of {world_size}"
        )
    if cfg.batch_size != total // world_size:
        log.info(
            "data.global_batch_size=%d over %d process(es): %d samples per process (data.batch_size=%d is not used)",
            total,
            world_size,
            total // world_size,
            cfg.batch_size,
        )
    return dataclasses.replace(cfg, batch_size=total // world_size)


def _loader_options(dataset: Dataset, cfg: DataConfig, mode: str) -> Dict[str, Any]:
    # Copies to the GPU on a side stream are only asynchronous from pinned memory.
    # A dataset whose items do not stack with default_collate (e.g. masks kept at their
    # original, differing sizes) batches them itself through a ``collate_fn`` attribute.
    options: Dict[str, Any] = {
        "num_workers": cfg.num_workers,
        "pin_memory": cfg.pin_memory or mode == "cuda",
        "collate_fn": getattr(dataset, "collate_fn", None),
    }
    if cfg.num_workers > 0:
        import_plugins()  # once here, not in each worker of each epoch
        options["persistent_workers"] = cfg.persistent_workers
        if cfg.prefetch_factor is not None:
            options["prefetch_factor"] = cfg.prefetch_factor
    return options


def _prefetching(
    loader: Any, cfg: DataConfig, mode: str, device: Optional[torch.device], channels_last: bool
) -> PrefetchLoader:
    # DALI normalizes inside its pipeline; the prefetcher does it for the torch loader, and makes floats of the
    # 8-bit images a dataset gives when asked (``batches_of_uint8``): once per batch, on the GPU with prefetch=cuda.
    if cfg.loader == "dali":
        return PrefetchLoader(loader, mode, cfg.prefetch_depth, device, None, None, channels_last)
    ask = getattr(loader.dataset, "batches_of_uint8", None) if isinstance(loader, DataLoader) else None
    eight_bit = bool(ask()) if callable(ask) and collates_new_tensors(loader) else False
    return PrefetchLoader(loader, mode, cfg.prefetch_depth, device, cfg.mean, cfg.std, channels_last, eight_bit)


def train_sampler(
    dataset: Dataset, cfg: DataConfig, rank: int, world_size: int, seed: int, generator: torch.Generator
) -> Any:
    """This rank's training order: a ``GlobalBatchSampler`` with ``data.global_batch_size``, else a
    ``ResumableSampler``; both reseed ``generator`` (the workers') per epoch and skip a resume's samples."""
    window = getattr(dataset, "window_order", lambda: None)()  # packed shards' data.args.shuffle_window
    if window is not None:
        _warn_small_window(window, cfg.global_batch_size or cfg.batch_size * world_size)
    if cfg.global_batch_size is None:
        return ResumableSampler(dataset, world_size, rank, seed, generator, window)
    if len(dataset) < cfg.global_batch_size:
        raise DataError(
            f"the training split has {len(dataset)} samples, fewer than one global batch (data.global_batch_size={cfg.global_batch_size}); lower it"
        )
    return GlobalBatchSampler(len(dataset), cfg.global_batch_size, rank, world_size, seed, generator, window)


def build_train_loader(
    dataset: Dataset,
    cfg: DataConfig,
    rank: int,
    world_size: int,
    seed: int,
    device: Optional[torch.device] = None,
    channels_last: bool = False,
    batchnorm: bool = False,
) -> PrefetchLoader:
    """Shuffled per epoch by a seeded ``ResumableSampler`` (a ``DistributedSampler``, also
    with one process, so the order depends only on seed and epoch: reproducible, and a
    resume can skip the batches an epoch had consumed). With ``data.global_batch_size``
    (``cfg`` from ``with_process_batch``) a ``GlobalBatchSampler`` instead: the order depends on
    seed and epoch only, not on the world size.

    Wrapped in the configured prefetcher (``data.prefetch``); ``len()`` and
    ``.sampler.set_epoch()`` work as on the DataLoader. ``data.loader=dali``
    reads the image folder of ``dataset`` with DALI pipelines instead.
    ``channels_last``: 4-D inputs come out NHWC (``model.channels_last``). ``batchnorm`` (the network has
    BatchNorm layers): a last batch of one sample, which ``data.drop_last=false`` would keep, is dropped.
    A ``data.batch_size`` above the samples per process gives one smaller batch per epoch (kept also under
    ``data.drop_last``, which would leave no step), with a warning naming both numbers.
    """
    mode = resolve_mode(cfg.prefetch, device)
    if cfg.loader == "dali":
        from utils.data.dali import build_dali_loader

        sampler = train_sampler(dataset, cfg, rank, world_size, seed, torch.Generator())
        return _prefetching(build_dali_loader(dataset, cfg, True, sampler, seed), cfg, mode, device, channels_last)
    generator = torch.Generator()  # seeds the workers; reseeded per epoch by the sampler
    sampler = train_sampler(dataset, cfg, rank, world_size, seed, generator)
    # a batch larger than the data: its one incomplete batch is kept
    drop_last = cfg.drop_last and len(sampler) >= cfg.batch_size
    if batchnorm and not drop_last and len(sampler) % cfg.batch_size == 1:  # every rank's sampler has the same length
        log.info(
            "data.drop_last=false: each epoch's last training batch would hold 1 sample, which BatchNorm cannot normalize in "
            "training; it is dropped (%d of %d samples per epoch are read)",
            len(sampler) - 1,
            len(sampler),
        )
        drop_last = True
    if len(sampler) < cfg.batch_size and not drop_last:
        kept = " (data.drop_last=true would drop it and leave no step, so it is kept)" if cfg.drop_last else ""
        log.warning(
            "data.batch_size=%d is more than the %d training samples per process: each epoch is one step of a %d-sample batch%s; "
            "set data.batch_size to at most %d, or add training data",
            cfg.batch_size,
            len(sampler),
            len(sampler),
            kept,
            len(sampler),
        )
    loader = DataLoader(
        dataset,
        batch_size=cfg.batch_size,
        sampler=sampler,
        drop_last=drop_last,
        generator=generator,
        **_loader_options(dataset, cfg, mode),
    )
    return _prefetching(loader, cfg, mode, device, channels_last)


def build_eval_loader(
    dataset: Dataset,
    cfg: DataConfig,
    rank: int,
    world_size: int,
    device: Optional[torch.device] = None,
    channels_last: bool = False,
) -> PrefetchLoader:
    """Disjoint, unpadded slices, one per rank: every sample is evaluated exactly once over all ranks."""
    mode = resolve_mode(cfg.prefetch, device)
    if cfg.loader == "dali":
        from utils.data.dali import build_dali_loader

        sampler = SliceSampler(len(dataset), rank, world_size)
        return _prefetching(build_dali_loader(dataset, cfg, False, sampler, 0), cfg, mode, device, channels_last)
    sampler = SliceSampler(len(dataset), rank, world_size)
    batch_size = cfg.eval_batch_size or cfg.batch_size
    loader = DataLoader(
        dataset, batch_size=batch_size, sampler=sampler, drop_last=False, **_loader_options(dataset, cfg, mode)
    )
    return _prefetching(loader, cfg, mode, device, channels_last)


def _warn_small_window(window: Any, global_batch: int) -> None:
    """A warning when a window of shards can hold fewer samples than a global batch: each batch is then
    whole windows, the same shards' samples together every epoch."""
    smallest = int(np.sort(window.sizes)[: window.window].sum())
    if smallest < global_batch:
        log.warning(
            "data.args.shuffle_window=%d: a window of %d shards can hold as few as %d samples, fewer than a global batch "
            "of %d, so each batch takes whole windows; raise data.args.shuffle_window to about %d or more",
            window.window,
            window.window,
            smallest,
            global_batch,
            -(-global_batch * window.window // max(smallest, 1)),
        )
