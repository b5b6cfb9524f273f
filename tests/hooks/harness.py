"""A tiny real Trainer per task (classification, sod, video) that runs one hook through fit and test, with the built-in services."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Tuple

import torch

from utils.amp import Amp
from utils.config import AmpConfig
from utils.checkpoint.store import CheckpointStore
from utils.engine.checkpointer import Checkpointer, NoCheckpointer
from utils.engine.components import LoopOptions, Parts, RunMeta, Services
from utils.engine.trainer import Trainer
from utils.engine.validator import Validator
from utils.log import RunWriter
from utils.run_folder import RunFolder
from utils.metrics import build_metric
from utils.model.criterion import build_criterion
from utils.optim.ema import ModelEma
from utils.registry import NETWORKS

TASKS: Dict[str, Dict[str, Any]] = {
    "classification": {"network": ("classifier", {"num_classes": 4, "backbone_args": {"in_channels": 1, "widths": [4, 8]}}), "loss": "cross_entropy", "monitor": "top1"},
    "sod": {"network": ("fpn_sod", {"backbone": "small_cnn", "backbone_args": {"widths": [4, 8]}, "channels": 4, "head_channels": 4}), "loss": "bce_with_logits", "monitor": "mae"},
    "video": {"network": ("video_classifier", {"num_classes": 4, "backbone_args": {"widths": [4, 8]}}), "loss": "cross_entropy", "monitor": "video_top1"},
}


def batches(task: str, count: int, seed: int) -> List[Tuple[torch.Tensor, Any]]:
    """``count`` batches of 4 samples of ``task``'s kind."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for b in range(count):
        if task == "classification":
            out.append((torch.rand(4, 1, 8, 8, generator=g), torch.randint(0, 4, (4,), generator=g)))
        elif task == "sod":
            masks = (torch.rand(4, 1, 16, 16, generator=g) > 0.5).float()
            out.append((torch.rand(4, 3, 16, 16, generator=g), {"mask": masks}))
        else:
            out.append((torch.rand(4, 3, 4, 8, 8, generator=g), {"label": torch.randint(0, 4, (4,), generator=g), "video": torch.arange(4 * b, 4 * b + 4)}))
    return out


def run_with(hook: Any, task: str, out: Path, ema: bool = False, checkpoints: bool = False) -> Trainer:
    """Two epochs of ``task`` with ``hook``, the run writer (into ``out``) and the validator (with ``checkpoints``:
    the checkpointer, into ``out/ckpt``), then the test."""
    torch.manual_seed(0)
    name, args = TASKS[task]["network"]
    model = NETWORKS.build(name, **args)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    amp = Amp(AmpConfig(opt_level="O0"), torch.device("cpu"))
    criterion = build_criterion([{"name": TASKS[task]["loss"]}])
    val = batches(task, 2, seed=1)
    parts = Parts(model, criterion, amp, optimizer, scheduler, batches(task, 3, seed=0), build_metric(task), ModelEma(model, decay=0.5) if ema else None)
    services = Services(
        writer=RunWriter(RunFolder(out), enabled=True),
        checkpointer=Checkpointer(CheckpointStore(out / "ckpt")) if checkpoints else NoCheckpointer(),
        validator=Validator(val, monitor=TASKS[task]["monitor"], mode="min" if task == "sod" else "max"),
    )
    trainer = Trainer(parts, LoopOptions(epochs=2, log_every=1), services, hooks=[hook], meta=RunMeta(config={"task": task}))
    try:
        trainer.fit()
        trainer.test(val, epoch=1)
    finally:
        trainer.close()
    return trainer


def tensorboard(out: Path) -> Any:
    """The run's event files, loaded with TensorBoard's own reader (every image kept)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tb"), size_guidance={"images": 0, "tensors": 0, "scalars": 0})
    acc.Reload()
    return acc
