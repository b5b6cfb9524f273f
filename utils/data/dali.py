"""NVIDIA DALI loader for image-folder data (``data.loader=dali``).

CPU pipelines (decode -> resize -> crop-mirror-normalize), so they also run
without a GPU; each rank reads its own slice (DALI's ``shard_id``/``num_shards``).
DALI is optional: ``pip install -e ".[dali]"`` (package nvidia-dali-cuda130);
it is imported only when a run asks for this loader (``check_dali`` before the run starts, then to build it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence, Tuple

import torch

from utils.config import DataConfig
from utils.errors import ConfigError

log = logging.getLogger(__name__)

READER = "reader"


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
    """What one rank's DALI pipeline reads and how it transforms it."""

    files: Sequence[str]  # the dataset's images and class indices (its one class list for every split)
    labels: Sequence[int]
    batch_size: int
    num_threads: int
    train: bool
    size: int
    mean: Sequence[float]
    std: Sequence[float]
    rank: int  # DALI's shard_id: the slice of the data this rank reads
    world_size: int  # DALI's num_shards
    seed: int


def _build_pipeline(spec: PipelineSpec) -> Any:
    dali = _import_dali()
    fn, types = dali.fn, dali.types

    @dali.pipeline_def(batch_size=spec.batch_size, num_threads=spec.num_threads, device_id=None, seed=spec.seed)
    def pipeline() -> Tuple[Any, Any]:
        # The same seed on every rank: one global permutation per epoch, split into disjoint slices.
        jpegs, labels = fn.readers.file(
            files=list(spec.files),
            labels=list(spec.labels),
            shard_id=spec.rank,
            num_shards=spec.world_size,
            shuffle_after_epoch=spec.train,
            pad_last_batch=False,
            name=READER,
            seed=spec.seed,
        )
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
    """Iterates ``(images, labels)`` like a DataLoader: float CHW images, int64 labels.

    ``len()`` is the number of batches of this rank's slice; ``sampler.set_epoch``
    exists for the training loop (DALI reshuffles by itself after every epoch,
    from the pipeline seed, so the order does not depend on the epoch number).
    """

    def __init__(self, pipe: Any, train: bool, slice_size: int, batch_size: int) -> None:
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy

        policy = LastBatchPolicy.DROP if train else LastBatchPolicy.PARTIAL
        self._iterator = DALIGenericIterator(
            [pipe], ["images", "labels"], reader_name=READER, last_batch_policy=policy, auto_reset=True
        )
        self._len = slice_size // batch_size if train else math.ceil(slice_size / batch_size)
        self.batch_size = batch_size
        self.epoch = 0

    @property
    def sampler(self) -> "DaliLoader":
        return self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[Tuple[torch.Tensor, torch.Tensor]]:
        for out in self._iterator:
            data = out[0]
            # Copies: DALI may reuse its output buffers while a prefetcher still holds the batch.
            yield data["images"].clone(), data["labels"].reshape(-1).long()


def build_dali_loader(dataset: Any, cfg: DataConfig, train: bool, rank: int, world_size: int, seed: int) -> DaliLoader:
    """A DALI loader over the files (and labels) that the ``image_folder`` ``dataset`` reads."""
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
    files, labels = [dataset.path(i) for i in range(len(dataset))], dataset.labels.tolist()  # DALI's reader takes lists
    pipe = _build_pipeline(
        PipelineSpec(
            files, labels, batch_size, max(cfg.num_workers, 1), train, int(size), mean, std, rank, world_size, seed
        )
    )
    slice_size = _slice_size(len(dataset), rank, world_size)
    log.info("DALI loader on %s: %d samples in this rank's slice (%d/%d)", folder, slice_size, rank, world_size)
    return DaliLoader(pipe, train, slice_size, batch_size)


def _slice_size(n: int, rank: int, world_size: int) -> int:
    """DALI's readers give rank i of k (its ``shard_id`` of ``num_shards``) the samples [i*n//k, (i+1)*n//k)."""
    return (rank + 1) * n // world_size - rank * n // world_size
