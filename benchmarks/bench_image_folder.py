"""``image_folder`` through the framework's loader against torchvision's ImageFolder + DataLoader.

The same generated JPEGs (about 500x375, 10 classes; smooth random content, so file sizes
are those of photographs rather than of noise or flat colour), the same augmentations
(RandomResizedCrop 224, horizontal flip, normalize), batch 64, 2 workers, one epoch per
case and round, interleaved. The framework's side is built as ``main.py`` builds it
(``load_config`` -> ``with_process_batch`` -> ``build_dataset`` -> ``build_train_loader``,
whose prefetch thread normalizes), with its decoding for the crop (the default) and without it
(``decode_for_crop: false``); torchvision's side is its documented recipe; DALI's CPU pipeline
(``device_id=None``: ``decoders.image_random_crop``, which decodes only the crop's region, resize, then
``crop_mirror_normalize`` with a random mirror) is a peer row where DALI is installed. The single-core
decode rate (PIL open + convert RGB) is the reference all are bounded by.

``python benchmarks/bench_image_folder.py [--quick] [--images N] [--rounds R]``
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import interleaved, loader_bench_main, ratios, row  # noqa: E402

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CLASSES, WIDTH, HEIGHT, BATCH, WORKERS = 10, 500, 375, 64, 2
TITLE = "19 image_folder loader"


def make_jpegs(count: int) -> Path:
    """``count`` JPEGs under ``<cache>/train/<class>/``, made once per count (a finished folder is reused)."""
    from PIL import Image

    root = Path(tempfile.gettempdir()) / f"regtrain_bench_jpegs_{count}"
    done = root / ".complete"
    if done.exists():
        return root
    rng = np.random.default_rng(0)
    for i in range(count):
        folder = root / "train" / f"class_{i % CLASSES}"
        folder.mkdir(parents=True, exist_ok=True)
        # a coarse random grid upsampled bicubically: smooth gradients and edges, like a photo's
        coarse = Image.fromarray(rng.integers(0, 256, (12, 16, 3), dtype=np.uint8))
        image = coarse.resize((WIDTH, HEIGHT), Image.BICUBIC)
        grain = rng.integers(-6, 7, (HEIGHT, WIDTH, 3))  # some sensor-like grain
        pixels = np.clip(np.asarray(image, dtype=np.int16) + grain, 0, 255).astype(np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:05d}.jpg", quality=90)
    done.touch()
    return root


def framework_loader(root: Path, name: str = "image_folder", args: str = "{}"):
    """The train loader exactly as ``main.py`` builds it for these overrides (``bench_shards`` reads shards with it)."""
    from utils.config.load import load_config
    from utils.data import build_dataset, build_train_loader, with_process_batch

    cfg = load_config(
        overrides=[
            f"data.name={name}",
            f"data.root={root}",
            f"data.args={args}",
            "data.train_transforms=[{name: RandomResizedCrop, size: 224}, {name: RandomHorizontalFlip}]",
            f"data.mean={MEAN}",
            f"data.std={STD}",
            f"data.batch_size={BATCH}",
            f"data.num_workers={WORKERS}",
            "model.input_size=[3,224,224]",
        ]
    )
    data = with_process_batch(cfg.data, 1)
    dataset = build_dataset(cfg.data, "train")
    return build_train_loader(dataset, data, 0, 1, cfg.seed, torch.device("cpu"))


def torchvision_loader(root: Path):
    """torchvision's documented ImageNet training recipe with the same augmentations."""
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision import transforms as T

    transform = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(), T.Normalize(MEAN, STD)])
    dataset = datasets.ImageFolder(str(root / "train"), transform=transform)
    return DataLoader(dataset, batch_size=BATCH, shuffle=True, num_workers=WORKERS)


def dali_loader(root: Path):
    """DALI's CPU pipeline on the same files and augmentations (2 threads, as 2 workers), None without DALI."""
    try:
        from nvidia.dali import fn, pipeline_def, types
        from nvidia.dali.plugin.pytorch import DALIGenericIterator, LastBatchPolicy
    except ImportError:
        return None

    @pipeline_def(batch_size=BATCH, num_threads=WORKERS, device_id=None, seed=0)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=str(root / "train"), random_shuffle=True, name="reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu", output_type=types.RGB)
        images = fn.resize(images, resize_x=224, resize_y=224)
        mirror = fn.random.coin_flip()
        mean, std = [255 * m for m in MEAN], [255 * s for s in STD]
        images = fn.crop_mirror_normalize(
            images, dtype=types.FLOAT, output_layout="CHW", mean=mean, std=std, mirror=mirror
        )
        return images, labels

    pipe = pipeline()
    pipe.build()
    iterator = DALIGenericIterator(
        [pipe], ["images", "labels"], reader_name="reader", last_batch_policy=LastBatchPolicy.DROP, auto_reset=True
    )
    return DaliEpochs(iterator)


class DaliEpochs:
    """One epoch of a DALI iterator per ``for`` loop, as ``(images, labels)``."""

    def __init__(self, iterator) -> None:
        self.iterator = iterator

    def __iter__(self):
        return ((out[0]["images"], out[0]["labels"]) for out in self.iterator)


def cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the loader's workers, joined at an epoch's end)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def images_per_s(loader, cpu_ms: List[float]) -> Callable[[], float]:
    """One epoch of ``loader`` (workers started and stopped as in training); images per second. Appends the
    CPU milliseconds per image to ``cpu_ms``: a figure that other processes on a shared machine do not move."""

    def once() -> float:
        sampler = getattr(loader, "sampler", None)
        if hasattr(sampler, "set_epoch"):  # what the trainer does each epoch
            sampler.set_epoch(len(cpu_ms))
        start, cpu, seen = time.perf_counter(), cpu_s(), 0
        for inputs, _ in loader:
            seen += inputs.shape[0]
        wall = time.perf_counter() - start
        cpu_ms.append(1e3 * (cpu_s() - cpu) / seen)
        return seen / wall

    return once


def decode_rate(root: Path, count: int) -> Callable[[], float]:
    """Single-core JPEG decode rate: PIL open + convert RGB, the first ``count`` files."""
    from PIL import Image

    files = sorted((root / "train").rglob("*.jpg"))[:count]

    def once() -> float:
        start = time.perf_counter()
        for f in files:
            with Image.open(f) as image:
                image.convert("RGB")
        return len(files) / (time.perf_counter() - start)

    return once


def run(quick: bool = False, images: int = 0, rounds: int = 0) -> List[dict]:
    images = images or (256 if quick else 1280)
    rounds = rounds or (1 if quick else 3)
    root = make_jpegs(images)
    loaders = {
        "framework": framework_loader(root),
        "full decode": framework_loader(root, args="{decode_for_crop: false}"),
        "torchvision": torchvision_loader(root),
        "dali": dali_loader(root),
    }
    cpu: Dict[str, List[float]] = {name: [] for name, loader in loaders.items() if loader is not None}
    cases: Dict[str, Callable[[], float]] = {name: images_per_s(loaders[name], cpu[name]) for name in cpu}
    cases["decode"] = decode_rate(root, min(images, 320))
    load = os.getloadavg()[0]
    rates = interleaved(cases, rounds, warmup=not quick)
    load = f"load {load:.2f} -> {os.getloadavg()[0]:.2f}"
    note = f"{images} JPEGs {WIDTH}x{HEIGHT}, batch {BATCH}, {WORKERS} workers, {os.cpu_count()} cores, {load}"
    cpu = {name: values[len(values) - rounds :] for name, values in cpu.items()}  # less the warm-up epoch
    for r in range(rounds):
        print(
            f"round {r}: "
            + ", ".join(f"{name} {rates[name][r]:.0f} img/s {cpu[name][r]:.2f} CPU ms/img" for name in cpu)
            + f"; decode {rates['decode'][r]:.0f} img/s/core"
        )
    decode_limit = [d * min(WORKERS, os.cpu_count() or 1) for d in rates["decode"]]
    rows = [
        row(
            TITLE,
            "ratio framework / torchvision (images/s)",
            ratios(rates["framework"], rates["torchvision"]),
            ">= 1.5",
            lambda m: m >= 1.5,
            note,
        ),
        row(
            TITLE,
            "CPU per image framework / torchvision",
            ratios(cpu["framework"], cpu["torchvision"]),
            "<= 0.6",
            lambda m: m <= 0.6,
            "CPU seconds of the process and its workers: what a shared machine's load barely moves",
        ),
        row(
            TITLE,
            "framework / decode limit (decode rate x workers)",
            ratios(rates["framework"], decode_limit),
            ">= 0.8",
            lambda m: m >= 0.8,
            "decode limit: single-core PIL open + convert RGB x workers",
        ),
        row(TITLE, "ratio framework / its full decode (images/s)", ratios(rates["framework"], rates["full decode"])),
        row(TITLE, "single-core decode images/s", rates["decode"], fmt="{:.0f}", note="PIL open + convert RGB"),
    ]
    for name in cpu:
        rows.append(row(TITLE, f"{name} images/s", rates[name], fmt="{:.0f}"))
        rows.append(row(TITLE, f"{name} CPU ms per image", cpu[name], fmt="{:.2f}"))
    return rows


def main() -> None:
    loader_bench_main(__doc__, run, None)


if __name__ == "__main__":
    main()
