"""``--mode test --checkpoint C`` (and the test that ends a training run): a checkpoint's network on the test split.

A test mode run writes into a ``test_NNN`` folder of its own (``utils/run/folder.py``); the training run's records
stay as they were. The test split must reach the network at the size it was trained at (``model.input_size``), as
predict's inputs must.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any, Dict

from utils.checkpoint.state import Checkpoint
from utils.commands.checkpoint_network import checkpoint_network
from utils.commands.command_line import Command
from utils.commands.options import (
    ModeParser,
    add_checkpoint,
    add_config,
    add_print_config,
    add_trust_file,
    needs_checkpoint,
)
from utils.commands.started import opened, prepare, print_config, report
from utils.config.schema import Config, save_config, to_dict
from utils.data import build_dataset, build_eval_loader
from utils.data.input_shape import check_task, check_test_size
from utils.data.input_sizing import flow, input_sizing
from utils.distributed.process_group import DistInfo
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts, RunMeta, Services
from utils.hook.selection import task_hooks
from utils.log import RunWriter
from utils.metrics import build_metric
from utils.model.criterion import build_criterion
from utils.run.folder import RunFolder

log = logging.getLogger(__name__)


def _num_classes(cfg: Config, checkpoint: Checkpoint) -> Any:
    """The class count the checkpoint's data had (for ``eval.extra_metrics``), else the network's."""
    return len(checkpoint.classes) if checkpoint.classes else cfg.model.args.get("num_classes")


def run_test(cfg: Config, run: RunFolder, trainer: Trainer, dataset: Any, epoch: int) -> Dict[str, float]:
    """Evaluate on the test split as the weights of ``epoch``; the writer and the hooks record it."""
    info = trainer.dist
    loader = build_eval_loader(dataset, cfg.data, info.rank, info.world_size, info.device, cfg.model.channels_last)
    # eval.save_predictions: the metric's task knows how to write them (each rank its own slice)
    on_batch = trainer.parts.metric.prediction_writer(run.predictions) if cfg.eval.save_predictions else None
    if cfg.eval.save_predictions and on_batch is None:
        log.warning("eval.save_predictions: metric '%s' writes no predictions", cfg.eval.metric)
    return trainer.test(loader, epoch, on_batch)


def _check_trained_size(cfg: Config, dataset: Any) -> None:
    """The test split of the checkpoint's task (``check_task``), at the size the checkpoint was trained at, as predict holds its inputs (DALI sizes its own).
    The fix named: the mask datasets' own size, else a Resize at the end of the eval transforms (which may be the cause)."""
    check_task(dataset, cfg.eval.metric)
    if cfg.data.loader == "dali" or not cfg.model.input_size or len(cfg.model.input_size) < 2:
        return
    sizing, (height, width) = input_sizing(cfg), cfg.model.input_size[-2:]
    resized = [*cfg.data.eval_transforms, {"name": "Resize", "size": [height, width]}]
    fix = sizing.fix if sizing.resize_last is not None else "data.eval_transforms=" + flow(resized)
    check_test_size(dataset, cfg.model.input_size, fix)


def test_checkpoint(cfg: Config, info: DistInfo, run: RunFolder, checkpoint: Checkpoint) -> Dict[str, float]:
    """Single-card (or distributed) evaluation of a checkpoint on the test split, recorded in ``run``."""
    if info.is_main:
        save_config(cfg, run.config)
    model, amp = checkpoint_network(cfg, checkpoint, info.device)
    parts = Parts(
        model,
        build_criterion(cfg.loss, cfg.model.prediction_key).to(info.device),
        amp,
        metric=build_metric(cfg.eval.metric, cfg.eval.extra_metrics, _num_classes(cfg, checkpoint)),
    )
    services = Services(writer=RunWriter(run, info.is_main))
    trainer = Trainer(
        parts,
        LoopOptions(),
        services,
        task_hooks(cfg.eval.metric, cfg.hooks),
        info,
        RunMeta(to_dict(cfg), checkpoint.classes),
    )
    progress = checkpoint.progress
    trainer.state.step = progress.step  # the test's row and events at the step the weights are of
    try:
        dataset = build_dataset(cfg.data, "test", checkpoint.classes)  # labelled as it was trained
        _check_trained_size(cfg, dataset)
        # the epoch its weights are of, as its validation record names it
        return run_test(cfg, run, trainer, dataset, progress.trained_epoch)
    finally:
        trainer.close()


def add_options(parser: ModeParser) -> None:
    add_config(parser)
    add_checkpoint(parser, "test")
    add_trust_file(parser)
    add_print_config(parser)


def run(args: argparse.Namespace) -> int:
    if args.print_config:
        return print_config(args, "test")
    start = prepare(args, "test")
    with opened(start) as started:
        report("test", test_checkpoint(start.cfg, start.info, started.folder, start.checkpoint), start, started.folder)
    return 0


COMMAND = Command(
    "--mode test",
    "test",
    "evaluate --checkpoint on data.test_split, its saved config as the base, in a test_NNN folder of its own",
    add_options,
    run,
    needs_checkpoint,
)
