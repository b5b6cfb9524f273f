"""Write the synthetic ``moving_shapes`` videos to disk as frame folders.

    python tools/export_moving_shapes.py data/moving_shapes [--format jpg] [--videos 600 120 240]

gives ``data/moving_shapes/{train,val,test}/<class>/<video>/<frame>.png``, which
``data.name=video_frames_folder data.root=data/moving_shapes`` reads back.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from utils.data.datasets.moving_shapes import export_frame_folders  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", help="output folder")
    parser.add_argument("--format", choices=("png", "jpg"), default="png", help="png is lossless; jpg like extracted datasets")
    parser.add_argument("--videos", type=int, nargs=3, default=(600, 120, 240), metavar=("TRAIN", "VAL", "TEST"))
    parser.add_argument("--num-frames", type=int, default=16)
    parser.add_argument("--size", type=int, default=32)
    parser.add_argument("--noise", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    videos = dict(zip(("train", "val", "test"), args.videos))
    written = export_frame_folders(
        args.root, image_format=args.format, videos=videos, num_frames=args.num_frames, size=args.size, noise=args.noise, seed=args.seed
    )
    print(f"wrote {written} videos to {args.root}")


if __name__ == "__main__":
    main()
