"""Seconds the default picture hooks add to one validation, per task, on the demo configs.

Each round validates the same model on the same val split twice, interleaved: with
the run writer alone, and with the run writer plus the task's default hooks
(confusion matrix and confident mistakes for digits, the saliency grid for
sod_shapes, clip strips and the confusion matrix for moving_shapes, the run
summary everywhere), each writing its pictures to a real TensorBoard event file.
The row is the median over rounds of the difference (and of the ratio).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Dict, List

import torch

from benchmarks.common import interleaved, ratios, row, timed
from utils.amp import Amp
from utils.config.load import load_config
from utils.data import build_dataset, build_eval_loader
from utils.distributed.process_group import DistInfo
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts, RunMeta, Services
from utils.hook.selection import default_hook_names, task_hooks
from utils.log import RunWriter
from utils.metrics import build_metric
from utils.model.build import build_network
from utils.model.criterion import build_criterion
from utils.run.folder import RunFolder

DEVICE = torch.device("cpu")
# (title, config, overrides of the full run, overrides of a --quick run): the demo configs' val splits
DEMOS = [
    ("digits", None, [], ["data.args={val_fraction: 0.05}"]),
    ("sod_shapes", "configs/sod_shapes.yaml", [], ["data.args.counts={train: 16, val: 16, test: 1}"]),
    (
        "video_moving_shapes",
        "configs/video_moving_shapes.yaml",
        ["data.args.videos={train: 12, val: 60, test: 6}"],
        ["data.args.videos={train: 12, val: 12, test: 6}"],
    ),
]


def validation(cfg, out: Path, with_pictures: bool):
    """A callable that runs one validation (evaluate + after_validation) and returns its seconds."""
    dataset = build_dataset(cfg.data, "val")
    loader = build_eval_loader(dataset, cfg.data, 0, 1, DEVICE)
    torch.manual_seed(0)
    model = build_network(cfg.model)
    parts = Parts(model, build_criterion(cfg.loss), Amp(cfg.amp, DEVICE), metric=build_metric(cfg.eval.metric))
    hooks = task_hooks(cfg.eval.metric, []) if with_pictures else []
    services = Services(writer=RunWriter(RunFolder(out), enabled=True))
    trainer = Trainer(
        parts,
        LoopOptions(),
        services,
        hooks,
        DistInfo(device=DEVICE),
        RunMeta(config={"experiment": cfg.experiment.name}),
    )

    def run() -> float:
        def once() -> None:
            results = trainer.evaluate(model, loader, split="val")
            trainer.hooks.call("after_validation", trainer, results)
            trainer.state.epoch += 1
            trainer.state.step += 1  # pictures are written at the step

        return timed(once)

    return run, trainer, len(dataset)


def run(quick: bool = False) -> List[dict]:
    rounds = 2 if quick else 7
    out_rows: List[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for title, config, full, small in DEMOS:
            cfg = load_config(
                config, [*(small if quick else full), f"experiment.output_root={tmp}", f"experiment.name={title}"]
            )
            plain, plain_trainer, samples = validation(cfg, Path(tmp) / title / "plain", False)
            pictures, picture_trainer, _ = validation(cfg, Path(tmp) / title / "pictures", True)
            times: Dict[str, List[float]] = interleaved({"plain": plain, "pictures": pictures}, rounds)
            for trainer in (plain_trainer, picture_trainer):
                trainer.close()
            added = [p - b for p, b in zip(times["pictures"], times["plain"])]
            hooks = ", ".join(default_hook_names(cfg.eval.metric))
            base = sorted(times["plain"])[len(times["plain"]) // 2]
            out_rows.append(
                row(
                    "6 TensorBoard pictures",
                    f"added s per validation, {title}",
                    added,
                    "",
                    None,
                    f"{samples} val samples ({hooks}); validation alone {base:.3f} s",
                )
            )
            out_rows.append(
                row(
                    "6 TensorBoard pictures",
                    f"validation time with / without, {title}",
                    ratios(times["pictures"], times["plain"]),
                    "",
                    None,
                    "same model, loader and split, interleaved",
                )
            )
    return out_rows
