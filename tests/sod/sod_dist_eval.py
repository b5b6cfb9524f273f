"""Evaluate a fixed small MINet on an odd-sized shapes_sod test split with ShardSampler shards.

Imported by tests/sod/test_sod_distributed.py for the single-process run and launched under
torchrun (2 gloo ranks) for the distributed one: ``python -m torch.distributed.run
--nproc_per_node=2 tests/sod/sod_dist_eval.py RESULT.json PREDICTIONS_DIR``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict

import torch

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from utils.amp import Amp  # noqa: E402
from utils.config import AmpConfig, DataConfig  # noqa: E402
from utils.data import build_eval_loader  # noqa: E402
from utils.distributed.process_group import cleanup, init_distributed  # noqa: E402
from utils.engine.evaluate import evaluate  # noqa: E402
from utils.model.criterion import build_criterion  # noqa: E402
from utils.registry import DATASETS, METRICS, NETWORKS  # noqa: E402

TEST_COUNT = 7  # odd: the two shards differ in size, and the last batches are ragged


def evaluate_split(rank: int, world_size: int, predictions: Path) -> Dict[str, float]:
    """Metrics (and loss) of the same network on the same split, this rank's shard only."""
    torch.manual_seed(0)
    model = NETWORKS.build("minet", backbone="small_cnn", backbone_args={"widths": [8, 16, 16]}, channels=8, sim_channels=4, head_channels=8)
    model.eval()
    dataset = DATASETS.build("shapes_sod", split="test", root=None, transform=None, size=32, counts={"test": TEST_COUNT})
    loader = build_eval_loader(dataset, DataConfig(name="shapes_sod", batch_size=2), rank, world_size)
    metric = METRICS.build("sod")
    criterion = build_criterion([{"name": "bce_with_logits"}, {"name": "cel"}])
    device = torch.device("cpu")
    return evaluate(model, loader, criterion, metric, Amp(AmpConfig(), device), device, False, on_batch=metric.prediction_writer(predictions))


def main() -> None:
    torch.set_num_threads(1)
    result_path, predictions = Path(sys.argv[1]), Path(sys.argv[2])
    info = init_distributed("cpu", "gloo", timeout_s=120)
    try:
        results = evaluate_split(info.rank, info.world_size, predictions)
        if info.is_main:
            result_path.write_text(json.dumps({"world_size": info.world_size, **results}))
    finally:
        cleanup()


if __name__ == "__main__":
    main()
