"""Evaluate a seeded clip classifier on clip splits that do not divide evenly; run alone or under torchrun.

    python -m torch.distributed.run --standalone --nproc_per_node=N tests/video/video_eval_worker.py OUT.json

Rank 0 writes ``{split name: metrics}`` to OUT.json; ``evaluate_splits(0, 1)``
gives the single-process numbers to compare with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from utils.amp import Amp  # noqa: E402
from utils.config import AmpConfig  # noqa: E402
from utils.data import ShardSampler  # noqa: E402
from utils.distributed.process_group import cleanup, init_distributed  # noqa: E402
from utils.engine.evaluate import evaluate  # noqa: E402
from utils.registry import DATASETS, LOSSES, METRICS, NETWORKS  # noqa: E402

# (videos, clips per video): 25 clips split 13/12 and 9/8/8, the clips of each video on several
# ranks; 2 clips over 3 ranks leave one rank without any.
SPLITS = {"uneven": (5, 5), "fewer_clips_than_ranks": (2, 1)}


def evaluate_splits(rank: int, world_size: int) -> Dict[str, Dict[str, float]]:
    torch.manual_seed(0)
    model = NETWORKS.build("video_classifier", num_classes=6, backbone_args={"widths": [4, 8]})
    device = torch.device("cpu")
    results = {}
    for name, (videos, clips) in SPLITS.items():
        data = DATASETS.build("moving_shapes", split="test", videos={"test": videos}, num_frames=6, size=16, clip_len=4, num_clips=clips)
        loader = DataLoader(data, batch_size=4, sampler=ShardSampler(len(data), rank, world_size))
        results[name] = evaluate(model, loader, LOSSES.build("cross_entropy"), METRICS.build("video"), Amp(AmpConfig(), device), device, show_progress=False)
    return results


if __name__ == "__main__":
    torch.set_num_threads(1)
    info = init_distributed("cpu", "gloo", timeout_s=120)
    try:
        out = evaluate_splits(info.rank, info.world_size)
        if info.is_main:
            Path(sys.argv[1]).write_text(json.dumps(out))
    finally:
        cleanup()
