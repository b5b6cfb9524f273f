"""NVIDIA DALI loader for image-folder data (``data.loader=dali``).

CPU pipelines (decode -> resize -> crop-mirror-normalize), so they also run
without a GPU (``device_id=None``). The order is the framework's: the torch loader's
sampler (``train_sampler`` for training, ``SliceSampler`` for evaluation) chooses each
batch's samples, whose file bytes DALI's ``external_source`` takes, so a step holds the
torch loader's samples on any world size and a resume skips by index.
DALI is optional: ``pip install -e ".[dali]"`` (package nvidia-dali-cuda130);
it is imported only when a run asks for this loader (``check_dali`` before the run starts, then to build it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch

from utils.config.schema import DataConfig
from utils.errors import ConfigError

log = logging.getLogger(__name__)


def _import_dali() -> Any:
    try:
        import nvidia.dali as dali  # noqa: F401
        import nvidia.dali.fn  # noqa: F401
        import nvidia.dali.types  # noqa: F401
        from nvidia.dali.plugin import pytorch  # noqa: F401
    except ImportError as err:
        raise ConfigError(
            f'data.loader=dali needs NVIDIA DALI, which is not installed ({err}); run pip install -e ".[dali]" or use data.loader=torch'
        ) from err
    return dali


def check_dali() -> None:
    """ConfigError when DALI is not importable: ``main.plan_start`` asks before a run folder is made or any data read."""
    _import_dali()


@dataclass
class PipelineSpec:
    """How one rank's DALI pipeline transforms what it reads."""

    batch_size: int
    num_threads: int
    train: bool
    size: int
    mean: Sequence[float]
    std: Sequence[float]


class BatchFeed:
    """DALI's ``external_source``: the file bytes and labels of each batch of dataset indices, in order."""

    def __init__(self, dataset: Any, batches: List[List[int]]) -> None:
        self.dataset, self.batches, self.at = dataset, batches, 0

    def __iter__(self) -> "BatchFeed":
        self.at = 0
        return self

    def __next__(self) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        if self.at >= len(self.batches):
            raise StopIteration
        indices, self.at = self.batches[self.at], self.at + 1
        files = [np.fromfile(self.dataset.path(i), dtype=np.uint8) for i in indices]
        return files, [np.array([self.dataset.label(i)], dtype=np.int64) for i in indices]


def _build_pipeline(spec: PipelineSpec, feed: BatchFeed, seed: int) -> Any:
    dali = _import_dali()
    fn, types = dali.fn, dali.types

    @dali.pipeline_def(batch_size=spec.batch_size, num_threads=spec.num_threads, device_id=None, seed=seed)
    def pipeline() -> Tuple[Any, Any]:
        jpegs, labels = fn.external_source(source=feed, num_outputs=2, batch=True, dtype=[types.UINT8, types.INT64])
        images = fn.decoders.image(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_shorter=spec.size)
        crop = (
            {
                "crop_pos_x": fn.random.uniform(range=(0.0, 1.0)),
                "crop_pos_y": fn.random.uniform(range=(0.0, 1.0)),
                "mirror": fn.random.coin_flip(),
            }
            if spec.train
            else {}
        )
        images = fn.crop_mirror_normalize(
            images,
            dtype=types.FLOAT,
            output_layout="CHW",
            crop=(spec.size, spec.size),
            mean=[255.0 * m for m in spec.mean],
            std=[255.0 * s for s in spec.std],
            **crop,
        )
        return images, labels

    pipe = pipeline()
    pipe.build()
    return pipe


class DaliLoader:
    """Iterates ``(images, labels)`` like a DataLoader: float CHW images, int64 labels, the batches of
    ``sampler``'s order (``len()``, ``sampler.set_epoch`` and ``sampler.skip_first`` as on the DataLoader).

    Each epoch builds its pipeline over that epoch's batches (a fraction of a second), seeded from the run's
    seed and the epoch: DALI's random crops and mirrors differ between epochs and are not the torch loader's.
    """

    def __init__(self, dataset: Any, spec: PipelineSpec, sampler: Any, drop_last: bool, seed: int) -> None:
        self.dataset, self.spec, self.sampler = dataset, spec, sampler
        self.batch_size, self.drop_last, self.seed = spec.batch_size, drop_last, seed

    def __len__(self) -> int:
        count = len(self.sampler)
        return count // self.batch_size if self.drop_last else math.ceil(count / self.batch_size)

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        order = list(self.sampler)
        batches = [order[i : i + self.batch_size] for i in range(0, len(order), self.batch_size)]
        if batches and self.drop_last and len(batches[-1]) < self.batch_size:
            batches.pop()
        if not batches:
            return
        seed = (self.seed * 1_000_003 + getattr(self.sampler, "epoch", 0)) % 2**31
        pipe = _build_pipeline(self.spec, BatchFeed(self.dataset, batches), seed)
        iterator = DALIGenericIterator([pipe], ["images", "labels"], last_batch_policy=LastBatchPolicy.PARTIAL)
        for out in iterator:
            data = out[0]
            # Copies: DALI may reuse its output buffers while a prefetcher still holds the batch.
            yield data["images"].clone(), data["labels"].reshape(-1).long()


def build_dali_loader(dataset: Any, cfg: DataConfig, train: bool, sampler: Any, seed: int) -> DaliLoader:
    """A DALI loader over the files (and labels) that the ``image_folder`` ``dataset`` reads, in the order of
    ``sampler``, the torch loader's for this rank (``utils/data/loader.py``)."""
    folder: Optional[str] = getattr(dataset, "root", None)
    if cfg.name != "image_folder" or folder is None or not hasattr(dataset, "path"):
        raise ConfigError(
            f"data.loader=dali reads image_folder data, not '{cfg.name}'; set data.name=image_folder or data.loader=torch"
        )
    if getattr(dataset, "packed", None) is not None:
        raise ConfigError(
            f"data.loader=dali reads image files, and data.root '{cfg.root}' is a pack; use data.loader=torch, which reads packs"
        )
    if getattr(dataset, "channels", 3) != 3:
        raise ConfigError(
            "data.loader=dali decodes images to RGB: data.args.channels must be 3 with it; use data.loader=torch for 1 channel"
        )
    size = cfg.args.get("image_size")
    if not size:
        raise ConfigError("data.loader=dali needs a fixed image size: set data.args.image_size (e.g. 224)")
    _import_dali()
    mean = cfg.mean if cfg.mean is not None else [0.0, 0.0, 0.0]
    std = cfg.std if cfg.std is not None else [1.0, 1.0, 1.0]
    batch_size = cfg.batch_size if train else (cfg.eval_batch_size or cfg.batch_size)
    spec = PipelineSpec(batch_size, max(cfg.num_workers, 1), train, int(size), mean, std)
    drop_last = (
        train and cfg.drop_last and len(sampler) >= batch_size
    )  # as the torch loader: a lone short batch is kept
    log.info("DALI loader on %s: %d samples in this rank's slice", folder, len(sampler))
    return DaliLoader(dataset, spec, sampler, drop_last, seed)
