"""Test accuracy with and without decoding for the crop (issue 42): seeds compared with ``--mode compare``.

An ImageNet-like task small enough for 2 cores: 10 classes of generated 500x375 JPEGs (a smooth random
background and three shapes per image, each class a hue, jittered strongly, and a shape: squares or discs),
600 for training and 200 to test. Each seed trains ``small_cnn`` for 3 epochs on RandomResizedCrop 64 + flip
(where most boxes decode at 1/2 or 1/4 of the size) and tests on Resize 73 + CenterCrop 64 (decoded at 1/4),
once with ``data.args.decode_for_crop`` (the default) and once without; ``python main.py --mode compare``
gives the means, intervals and Welch's p-value of the two configurations.

``python benchmarks/bench_decode_accuracy.py [--seeds N] [--out DIR]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
COMMON = [
    "data.name=image_folder",
    "data.test_split=val",
    "data.train_transforms=[{name: RandomResizedCrop, size: 64}, {name: RandomHorizontalFlip}]",
    "data.eval_transforms=[{name: Resize, size: 73}, {name: CenterCrop, size: 64}]",
    "data.mean=[0.485, 0.456, 0.406]",
    "data.std=[0.229, 0.224, 0.225]",
    "model.input_size=[3, 64, 64]",
    "model.args={backbone: small_cnn, num_classes: 10, backbone_args: {in_channels: 3}}",
    "data.batch_size=32",
    "data.num_workers=2",
    "train.epochs=3",
]


def make_images(root: Path) -> Path:
    """The task's JPEGs under ``root/{train,val}/c<k>/``, made once (a finished folder is reused)."""
    from PIL import Image, ImageDraw

    if (root / ".complete").exists():
        return root
    rng = np.random.default_rng(0)
    for split, count in (("train", 60), ("val", 20)):
        for c in range(10):
            folder = root / split / f"c{c}"
            folder.mkdir(parents=True, exist_ok=True)
            hue = np.array([(c * 97) % 256, (c * 53 + 80) % 256, (c * 31 + 160) % 256])
            for i in range(count):
                coarse = Image.fromarray(rng.integers(0, 256, (6, 8, 3), dtype=np.uint8))
                image = coarse.resize((500, 375), Image.BICUBIC)
                draw = ImageDraw.Draw(image)
                for _ in range(3):
                    x, y, r = rng.integers(0, 500), rng.integers(0, 375), rng.integers(20, 70)
                    colour = tuple(int(v) for v in np.clip(hue + rng.integers(-90, 90, 3), 0, 255))
                    (draw.ellipse if c % 2 else draw.rectangle)([x - r, y - r, x + r, y + r], fill=colour)
                grain = rng.integers(-8, 9, (375, 500, 3))
                pixels = np.clip(np.asarray(image, np.int16) + grain, 0, 255).astype(np.uint8)
                Image.fromarray(pixels).save(folder / f"{i:03d}.jpg", quality=90)
    (root / ".complete").touch()
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "regtrain_decode_accuracy"))
    args = parser.parse_args()
    data = make_images(Path(tempfile.gettempdir()) / "regtrain_decode_accuracy_jpegs")
    out = Path(args.out)
    cases = {"decode_for_crop": [], "full_decode": ["data.args={decode_for_crop: false}"]}
    for seed in range(args.seeds):
        for name, extra in cases.items():
            run = [*COMMON, f"data.root={data}", f"experiment.output_root={out}", f"experiment.name={name}"]
            subprocess.run([sys.executable, "main.py", *run, *extra, f"seed={seed}"], cwd=ROOT, check=True)
    subprocess.run(
        [sys.executable, "main.py", "--mode", "compare", *(str(out / n) for n in cases)], cwd=ROOT, check=True
    )


if __name__ == "__main__":
    main()
