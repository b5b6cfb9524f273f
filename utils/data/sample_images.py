"""Sample images to try ``--mode predict`` on: digits of the quick start's test split as the PNG files a user has.

    python -m utils.data.sample_images samples/
    python main.py --mode predict --checkpoint output/digits_small_cnn/latest/checkpoints/best.pt --input samples/

writes ``digit<D>_<N>.png`` (N: its place in the test split): the first test image of each digit D (``--count``
more or fewer), 8x8 grey PNGs of what the ``digits`` dataset gives the network (a white digit on black, [0, 1] as
0-255), so the quick start's checkpoint predicts them as it tested them; the file name tells the true digit.
The test split is the quick start's (``data.args`` at their defaults): images no training saw. Exit 2 with
one ``error:`` line for a folder it cannot write.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

import torch

from utils.data.datasets.digits import Digits
from utils.errors import ConfigError, OutputError, UserError, one_line
from utils.run.folder import place_in_run

DIGITS = 10


def test_order(labels: List[int]) -> List[int]:
    """Positions in the test split: each digit's first image, then each digit's second, ..."""
    rounds = [[at for at, label in enumerate(labels) if label == digit] for digit in range(DIGITS)]
    return [each[n] for n in range(max(map(len, rounds))) for each in rounds if n < len(each)]


def write_samples(folder: Path, count: int = DIGITS) -> List[Path]:
    """Write ``count`` digits of the quick start's test split as PNGs into ``folder`` (made when missing; never a run
    folder); their paths."""
    from PIL import Image

    test = Digits("test")  # data.args at their defaults: the quick start's split
    labels = test.labels.tolist()
    order = test_order(labels)
    if not 1 <= count <= len(order):
        raise ConfigError(f"--count must be 1 to {len(order)} (the digits of the test split), got {count}")
    where = place_in_run(folder)
    if where is not None:
        raise ConfigError(f"'{folder}' {where}; sample images never go into a run: give another folder")
    paths = []
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for at in order[:count]:
            path = folder / f"digit{labels[at]}_{at:03d}.png"
            pixels = (test.images[at, 0] * 255.0).round().to(torch.uint8).numpy()  # [0, 1] as the network reads it
            Image.fromarray(pixels).save(path)
            paths.append(path)
    except OSError as err:
        raise OutputError(
            f"cannot write sample images into '{folder}' ({err.strerror or err}); give a writable folder"
        ) from err
    return paths


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="where to write the PNG files (made when missing)")
    parser.add_argument("--count", type=int, default=DIGITS, help="how many images (default: one of each digit)")
    args = parser.parse_args(argv)
    try:
        paths = write_samples(args.folder, args.count)
    except UserError as err:
        print(f"error: {one_line(err)}", file=sys.stderr, flush=True)
        return 2
    print(f"sample_images: images={len(paths)} folder={args.folder}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
