"""JPEG decoders on one core: Pillow, pillow-simd, simplejpeg and torchvision.io (issue 42, item 3).

The generated JPEGs of ``bench_image_folder.py`` (about 500x375). Per image, CPU milliseconds (the best of
``--rounds`` passes over the files, one torch thread): ``decode`` (the whole image to 8-bit RGB) and ``crop``
(decode + RandomResizedCrop 224 + horizontal flip on the same boxes, drawn once by torchvision's law, each
library's own way: Pillow's ``resize`` with a box, else torchvision's uint8 ``resized_crop``). pillow-simd
replaces Pillow in whatever environment it is installed into, so it is measured in a child process with
``--simd FOLDER`` (a ``pip install --target FOLDER pillow-simd``) first on its path; a library that does not
import gives no row. PyTurboJPEG 2 needs the system's libjpeg-turbo 3, which is no wheel: measured where found.

``python benchmarks/bench_decoders.py [--images N] [--rounds R] [--simd FOLDER]``
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SIZE = 224


def boxes(count: int) -> List[dict]:
    """RandomResizedCrop(224)'s boxes on a 500x375 image, by torchvision's own law (seed 0), and flips."""
    import torch
    from torchvision.transforms import v2

    torch.manual_seed(0)
    crop = v2.RandomResizedCrop(SIZE)
    blank = torch.zeros((), dtype=torch.uint8).expand(3, 375, 500)
    return [{**crop.make_params([blank]), "flip": bool(torch.rand(()) < 0.5)} for _ in range(count)]


def pillow_cases(datas: List[bytes], drawn: List[dict]) -> Dict[str, Callable[[int], object]]:
    from PIL import Image

    def decode(i: int) -> object:
        with Image.open(io.BytesIO(datas[i])) as image:
            return image.convert("RGB")

    def crop(i: int) -> object:  # torchvision's RandomResizedCrop on a PIL image: one resize with the box
        b = drawn[i]
        box = (b["left"], b["top"], b["left"] + b["width"], b["top"] + b["height"])
        out = decode(i).resize((SIZE, SIZE), Image.BILINEAR, box=box)
        return out.transpose(Image.FLIP_LEFT_RIGHT) if b["flip"] else out

    return {"decode": decode, "crop": crop}


def array_cases(decode: Callable[[bytes], object], datas: List[bytes], drawn: List[dict]) -> Dict[str, Callable]:
    """A decoder into an ``[H, W, 3]`` array, then the framework's uint8 ``resized_crop`` and flip."""
    import torch
    from torchvision.transforms.v2 import functional as F

    def crop(i: int) -> object:
        b = drawn[i]
        pixels = torch.as_tensor(decode(datas[i])).permute(2, 0, 1)
        out = F.resized_crop(pixels, b["top"], b["left"], b["height"], b["width"], [SIZE, SIZE], antialias=True)
        return out.flip(-1) if b["flip"] else out

    return {"decode": lambda i: decode(datas[i]), "crop": crop}


def measure(cases: Dict[str, Callable[[int], object]], count: int, rounds: int) -> Dict[str, float]:
    """CPU ms per image of each case: the best of ``rounds`` passes (a shared machine only adds time)."""
    best = {}
    for name, case in cases.items():
        times = []
        for _ in range(rounds):
            start = time.process_time()
            for i in range(count):
                case(i)
            times.append(1e3 * (time.process_time() - start) / count)
        best[name] = min(times)
    return best


def library_cases(datas: List[bytes], drawn: List[dict]) -> Dict[str, Dict[str, Callable]]:
    """Every decoder that imports here, by name (Pillow always)."""
    import numpy as np
    import PIL

    found = {f"Pillow {PIL.__version__}": pillow_cases(datas, drawn)}
    try:
        import simplejpeg

        found[f"simplejpeg {simplejpeg.__version__}"] = array_cases(
            lambda d: simplejpeg.decode_jpeg(d, "RGB"), datas, drawn
        )
    except ImportError:
        pass
    try:
        import torch
        import torchvision
        from torchvision.io import decode_jpeg

        def tv_decode(data: bytes) -> object:
            return decode_jpeg(torch.frombuffer(bytearray(data), dtype=torch.uint8)).permute(1, 2, 0)

        found[f"torchvision.io {torchvision.__version__}"] = array_cases(tv_decode, datas, drawn)
    except ImportError:
        pass
    try:
        from turbojpeg import TurboJPEG

        turbo = TurboJPEG()
        found["PyTurboJPEG"] = array_cases(lambda d: np.asarray(turbo.decode(d))[..., ::-1], datas, drawn)
    except (ImportError, RuntimeError, OSError) as err:  # no libjpeg-turbo 3 on the system: no row
        print(f"PyTurboJPEG: no row ({type(err).__name__}: {str(err).splitlines()[0]})", file=sys.stderr)
    return found


def run(images: int, rounds: int, simd: str = "", pillow_only: bool = False) -> Dict[str, Dict[str, float]]:
    import torch

    from benchmarks.bench_image_folder import make_jpegs

    torch.set_num_threads(1)
    files = sorted((make_jpegs(max(images, 256)) / "train").rglob("*.jpg"))[:images]
    datas, drawn = [f.read_bytes() for f in files], boxes(len(files))
    cases = library_cases(datas, drawn)
    if pillow_only:
        cases = {name: c for name, c in cases.items() if name.startswith("Pillow")}
    results = {name: measure(c, len(files), rounds) for name, c in cases.items()}
    if simd:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([simd, str(ROOT)])}
        child = [sys.executable, __file__, "--images", str(images), "--rounds", str(rounds), "--pillow-only", "--json"]
        out = subprocess.run(child, env=env, capture_output=True, text=True, timeout=600, check=True).stdout
        results.update({name.replace("Pillow", "pillow-simd"): r for name, r in json.loads(out).items()})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--simd", default="", help="a folder with pillow-simd installed (pip install --target)")
    parser.add_argument("--pillow-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    results = run(args.images, args.rounds, args.simd, args.pillow_only)
    if args.json:
        print(json.dumps(results))
        return
    load = os.getloadavg()[0]
    print(f"{args.images} JPEGs 500x375, 1 thread, best of {args.rounds}, load {load:.2f}: CPU ms per image")
    base = next(r for name, r in results.items() if name.startswith("Pillow"))
    for name, r in results.items():
        print(
            f"| {name} | {r['decode']:.2f} | {r['crop']:.2f} | {base['decode'] / r['decode']:.2f}x | {base['crop'] / r['crop']:.2f}x |"
        )


if __name__ == "__main__":
    main()
