"""The framework's shards (``--mode pack``, ``data.name=shards``) against MosaicML MDS, LitData and WebDataset.

The JPEGs of ``bench_image_folder.py`` (about 500x375, 10 classes) are written in each format
in shards of about 4 MB, the JPEG bytes as stored, uncompressed: the framework's ``pack`` in
process (``bench_shards.pack_into``), MDS ``MDSWriter`` (columns image: bytes, label, index:
int), LitData ``optimize`` (1 worker, a dict of the same three), WebDataset ``ShardWriter``
(``<key>.jpg``, ``<key>.cls``). The framework's format is tar shards in WebDataset's layout plus
an index of byte offsets, so that its samplers (world-size-independent order, exact resume) can
read sample i directly; the alternatives are read through the iterable loaders they document.

1. write seconds, and each library's / the framework's ``pack`` (each round writes a new folder);
2. images/s of one shuffled epoch from the local folder, each / the framework's shards in the
   same round. The framework's side is its train loader as ``main.py`` builds it (as in
   ``bench_shards.py``); MDS ``StreamingDataset(local=..., shuffle=True, batch_size=64)`` in a
   torch DataLoader; LitData ``StreamingDataset(input_dir=..., shuffle=True)`` in its
   ``StreamingDataLoader``; ``wds.WebDataset(urls, shardshuffle=...).shuffle(1000)`` in a
   ``wds.WebLoader``. Their samples all get the same work: PIL decode to RGB, then
   torchvision.transforms.v2 RandomResizedCrop 224 + flip on uint8, float, normalize. The
   control ``folder`` does that work on the JPEG files (map-style, DataLoader shuffle), so
   each library / folder is the cost of its format alone. Batch 64, 2 workers, one epoch per
   case and round, interleaved (``benchmarks/common.py``);
3. distinct samples per epoch / dataset size (and samples read): the alternatives carry each
   sample's index and every epoch's are counted; the framework's are its sampler's for an epoch.

A library that cannot be imported is left out with a note; the framework's rows remain.

``python benchmarks/bench_shard_formats.py [--quick] [--images N] [--rounds R]``
"""

from __future__ import annotations

import functools
import importlib
import io
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset, IterableDataset  # noqa: E402

from benchmarks.bench_image_folder import BATCH, MEAN, STD, WORKERS, images_per_s, make_jpegs  # noqa: E402
from benchmarks.bench_shards import SHARD_SIZE, pack_into, train_loader  # noqa: E402
from benchmarks.common import interleaved, loader_bench_main, ratios, row  # noqa: E402

TITLE = "21 shard formats"
SHARD_BYTES = 4_000_000  # SHARD_SIZE ("4MB") as the framework reads it
LIBRARIES = {"mds": "streaming", "litdata": "litdata", "webdataset": "webdataset"}
Files = List[Tuple[Path, int]]


def files_of(jpegs: Path) -> Files:
    """(path, label) of every JPEG, labels by sorted class folder, as ``image_folder`` numbers them."""
    classes = sorted(p.name for p in (jpegs / "train").iterdir() if p.is_dir())
    return [(f, classes.index(f.parent.name)) for f in sorted((jpegs / "train").rglob("*.jpg"))]


@functools.lru_cache(maxsize=None)
def augment() -> Callable:
    from torchvision.transforms import v2

    return v2.Compose(
        [
            v2.ToImage(),
            v2.RandomResizedCrop(224, antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
            v2.Normalize(MEAN, STD),
        ]
    )


def sample(jpeg: bytes, label: int, index: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The per-sample work of every alternative: decode to RGB, crop + flip, float + normalize."""
    from PIL import Image

    with Image.open(io.BytesIO(jpeg)) as image:
        rgb = image.convert("RGB")
    return augment()(rgb), torch.tensor([int(label), int(index)])


def from_dict(item: Dict[str, Any]) -> Tuple[torch.Tensor, torch.Tensor]:
    return sample(item["image"], item["label"], item["index"])


def from_tuple(item: Tuple[bytes, bytes, str]) -> Tuple[torch.Tensor, torch.Tensor]:
    return sample(item[0], int(item[1]), int(item[2]))


class Keyed:
    """A loader whose batches are (inputs, [label, index] rows): yields (inputs, labels), keeps each epoch's indices."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader
        self.epochs: List[List[int]] = []

    def __iter__(self):
        seen: List[int] = []
        self.epochs.append(seen)
        for inputs, extra in self.loader:
            seen.extend(extra[:, 1].tolist())
            yield inputs, extra[:, 0]


def write_mds(files: Files, out: Path) -> None:
    from streaming import MDSWriter

    columns = {"image": "bytes", "label": "int", "index": "int"}
    with MDSWriter(out=str(out), columns=columns, compression=None, size_limit=SHARD_BYTES) as writer:
        for i, (path, label) in enumerate(files):
            writer.write({"image": path.read_bytes(), "label": label, "index": i})


def litdata_item(item: Tuple[str, int, int]) -> Dict[str, Any]:
    return {"image": Path(item[0]).read_bytes(), "label": item[1], "index": item[2]}


def write_litdata(files: Files, out: Path) -> None:
    from litdata import optimize

    inputs = [(str(path), label, i) for i, (path, label) in enumerate(files)]
    # optimize sets the process's multiprocessing start method (to spawn unless told): keep the default fork,
    # which every loader after it (the framework's too) would otherwise inherit
    optimize(litdata_item, inputs, str(out), chunk_bytes=SHARD_BYTES, num_workers=1, verbose=False, start_method="fork")


def write_wds(files: Files, out: Path) -> None:
    import webdataset as wds

    out.mkdir(parents=True)
    with wds.ShardWriter(str(out / "shard-%06d.tar"), maxsize=SHARD_BYTES, verbose=0) as writer:
        for i, (path, label) in enumerate(files):
            writer.write({"__key__": f"{i:06d}", "jpg": path.read_bytes(), "cls": label})


class Mapped(IterableDataset):
    """``fn`` over each item of an iterable dataset (MDS's ``StreamingDataset``), picklable for any start method."""

    def __init__(self, dataset: Any, fn: Callable) -> None:
        self.dataset, self.fn = dataset, fn

    def __iter__(self):
        return map(self.fn, self.dataset)


class Folder(Dataset):
    """The control: the alternatives' per-sample work on the JPEG files themselves (no shards)."""

    def __init__(self, files: Files) -> None:
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> Tuple[torch.Tensor, torch.Tensor]:
        return sample(self.files[i][0].read_bytes(), self.files[i][1], i)


def mds_loader(folder: Path) -> Keyed:
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()
    dataset = StreamingDataset(local=str(folder), shuffle=True, batch_size=BATCH)
    return Keyed(DataLoader(Mapped(dataset, from_dict), batch_size=BATCH, num_workers=WORKERS))


def litdata_loader(folder: Path) -> Keyed:
    from litdata import StreamingDataLoader, StreamingDataset

    dataset = StreamingDataset(input_dir=str(folder), shuffle=True, transform=from_dict)
    return Keyed(StreamingDataLoader(dataset, batch_size=BATCH, num_workers=WORKERS))


def wds_loader(folder: Path) -> Keyed:
    import webdataset as wds

    urls = sorted(str(p) for p in folder.glob("*.tar"))
    dataset = wds.WebDataset(urls, shardshuffle=len(urls), empty_check=False).shuffle(1000)
    dataset = dataset.to_tuple("jpg", "cls", "__key__").map(from_tuple)
    return Keyed(wds.WebLoader(dataset, batch_size=BATCH, num_workers=WORKERS))


WRITERS = {"mds": write_mds, "litdata": write_litdata, "webdataset": write_wds}
LOADERS = {"mds": mds_loader, "litdata": litdata_loader, "webdataset": wds_loader}


def importable() -> Dict[str, str]:
    """name -> version of each alternative that imports; a note for each that does not."""
    found = {}
    for name, module in LIBRARIES.items():
        try:
            found[name] = getattr(importlib.import_module(module), "__version__", "?")
        except Exception as err:  # noqa: BLE001  # any import failure leaves the library out
            print(f"{name} rows left out: import {module} failed ({type(err).__name__}: {err})")
    return found


def writing(write: Callable[[Path], Any], out: Path) -> Callable[[], float]:
    """Seconds of ``write(out)`` into an emptied ``out``."""

    def once() -> float:
        shutil.rmtree(out, ignore_errors=True)
        start = time.perf_counter()
        write(out)
        return time.perf_counter() - start

    return once


def stored(folder: Path) -> Tuple[int, int]:
    """Files and bytes under ``folder``."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def run(quick: bool = False, images: int = 0, rounds: int = 0) -> List[dict]:
    images = images or (256 if quick else 1280)
    rounds = rounds or (1 if quick else 3)
    jpegs = make_jpegs(images)
    files = files_of(jpegs)
    versions = importable()
    formats = ["framework", *versions]
    with tempfile.TemporaryDirectory(prefix="bench-shard-formats-") as tmp:
        work = Path(tmp)
        writes = {"framework": writing(lambda out: pack_into(jpegs, str(out)), work / "write-framework")}
        writes.update({n: writing(functools.partial(WRITERS[n], files), work / f"write-{n}") for n in versions})
        load = os.getloadavg()[0]
        seconds = interleaved(writes, rounds, warmup=not quick)
        sizes = {n: stored(work / f"write-{n}") for n in formats}  # the last round's; read from here on
        loaders: Dict[str, Any] = {"framework": train_loader("shards", str(work / "write-framework"))}
        loaders.update({n: LOADERS[n](work / f"write-{n}") for n in versions})
        loaders["folder"] = Keyed(DataLoader(Folder(files), batch_size=BATCH, shuffle=True, num_workers=WORKERS))
        cpu: Dict[str, List[float]] = {n: [] for n in loaders}
        rates = interleaved({n: images_per_s(loaders[n], cpu[n]) for n in loaders}, rounds, warmup=not quick)
        load = f"load {load:.2f} -> {os.getloadavg()[0]:.2f}"
    for r in range(rounds):
        print(f"round {r}: write s " + ", ".join(f"{n} {seconds[n][r]:.2f}" for n in formats))
        print(f"round {r}: images/s " + ", ".join(f"{n} {rates[n][r]:.0f}" for n in rates))
    print("versions: " + (", ".join(f"{n} {v}" for n, v in versions.items()) or "none of the alternatives"))
    note = f"{images} JPEGs, shards of {SHARD_SIZE}, batch {BATCH}, {WORKERS} workers, {os.cpu_count()} cores, {load}"
    rows = []
    for n in formats:
        count, size = sizes[n]
        measure, values = (f"{n} write s / framework pack", ratios(seconds[n], seconds["framework"]))
        if n == "framework":
            measure, values = "framework pack, write s", seconds[n]
        about = f"{n} {versions[n]}; " if n in versions else ""
        median = statistics.median(seconds[n])
        rows.append(row(TITLE, measure, values, note=f"{about}{count} files, {size / 1e6:.1f} MB; {median:.2f} s"))
    rows[0]["note"] += f"; {note}"
    for n in [*versions, "folder"]:
        rows.append(row(TITLE, f"{n} / framework local shards (images/s)", ratios(rates[n], rates["framework"])))
    for n in versions:
        rows.append(row(TITLE, f"{n} / folder, same per-sample work (images/s)", ratios(rates[n], rates["folder"])))
    skip = 0 if quick else 1  # the warm-up epoch
    for n in [*versions, "folder"]:
        rows.append(row(TITLE, f"CPU ms per image {n} / framework", ratios(cpu[n][skip:], cpu["framework"][skip:])))
    for n in rates:
        rows.append(row(TITLE, f"{n} images/s", rates[n], fmt="{:.0f}"))
        rows.append(row(TITLE, f"{n} CPU ms per image", cpu[n][skip:], fmt="{:.2f}"))
    framework = loaders.pop("framework").sampler
    framework.set_epoch(0)
    epochs = {"framework": [list(iter(framework))], **{n: loader.epochs for n, loader in loaders.items()}}
    for n, seen in epochs.items():
        distinct = [len(set(e)) / len(files) for e in seen]
        read = f"samples read / dataset size {min(len(e) for e in seen) / len(files):.3f} .. {max(len(e) for e in seen) / len(files):.3f}"
        rows.append(
            row(TITLE, f"{n}: distinct samples per epoch / dataset size", distinct, "1.0", lambda m: m == 1.0, read)
        )
    return rows


def main(argv: Optional[List[str]] = None) -> None:
    loader_bench_main(__doc__, run, argv)


if __name__ == "__main__":
    main()
