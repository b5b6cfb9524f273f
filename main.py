"""Train or test a registered network: ``python main.py [--config FILE] [key=value ...]``.

Launch the same command under ``torchrun --nproc_per_node=N`` or
``python -m torch.distributed.launch --nproc_per_node=N`` for N processes.

Exit codes: 0 done; 2 bad input (a ``UserError``: one ``error:`` line); 143 stopped by
SIGTERM/SIGINT after writing a checkpoint (resume with ``--resume``); 1 any other
failure, with its traceback (under torchrun prefixed with the failing rank).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import traceback
from typing import Dict, List, Optional

import torch

from utils import __version__
from utils.amp import Amp
from utils.checkpoint.files import load_file
from utils.checkpoint.guard import (
    check_resume_config,
    resume_differences,
    weight_mismatch,
)
from utils.checkpoint.restore import find_resume, init_weights, restore_training_state
from utils.checkpoint.store import CheckpointStore
from utils.checkpoint.weights import state_dict_of
from utils.config import Config, load_config, save_config, to_dict
from utils.data import build_dataset, build_eval_loader, build_train_loader
from utils.distributed.ops import is_dist
from utils.distributed.parallel import convert_sync_bn, unwrap, without_ddp, wrap_model
from utils.distributed.preempt import PREEMPTED_EXIT, Preempted
from utils.distributed.process_group import (
    DistInfo,
    cleanup,
    exit_now,
    init_distributed,
)
from utils.distributed.replicas import check_replicas
from utils.distributed.seed import seed_everything
from utils.engine.control import BestTracker, steps_per_epoch, training_length
from utils.engine.evaluate import evaluate
from utils.engine.nonfinite import NonFinitePolicy
from utils.engine.trainer import LoopOptions, Trainer
from utils.errors import CheckpointError, ConfigError, UserError
from utils.log import RunWriter, format_metrics, setup_logging
from utils.metrics import build_metric
from utils.model.build import build_network
from utils.model.criterion import build_criterion
from utils.model.summary import count_flops, count_parameters
from utils.optim.ema import build_ema
from utils.optim.freeze import apply_freeze
from utils.optim.optimizers import build_optimizer
from utils.optim.schedules import build_scheduler

log = logging.getLogger("main")

def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="experiment YAML file (defaults: utils/config.py)")
    parser.add_argument("--mode", choices=("train", "test"), default="train")
    parser.add_argument("--checkpoint", help="test mode: checkpoint to evaluate (its saved config is the base)")
    parser.add_argument("--resume", action="store_true", help="continue from the newest good checkpoint in output/<experiment>/checkpoints/")
    parser.add_argument("--resume-force", action="store_true", help="resume even though the model or data config changed")
    # torch.distributed.launch passes --local-rank=N (older PyTorch: --local_rank N); torchrun sets LOCAL_RANK.
    parser.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
    parser.add_argument("--debug", action="store_true", help="show tracebacks for input errors")
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")
    args = parser.parse_intermixed_args(argv)  # options may follow key=value overrides
    if args.local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", str(args.local_rank))
    if args.mode == "test" and not args.checkpoint:
        parser.error("--mode test needs --checkpoint PATH")
    return args


def resolve_config(args: argparse.Namespace) -> Config:
    """Test mode starts from the config saved in the checkpoint; the file and overrides apply on top."""
    base = load_file(args.checkpoint).get("config") if args.mode == "test" else None
    cfg = load_config(args.config, args.overrides, base=base)
    for name in cfg.custom_imports:
        import_custom(name)
    return cfg


def import_custom(name: str) -> None:
    """Import a ``custom_imports`` module; only a module that does not exist is bad input.

    An ImportError raised by the module's own imports is a bug in that module and
    keeps its traceback.
    """
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name is None or not (name == err.name or name.startswith(err.name + ".")):
            raise
        raise ConfigError(f"custom_imports: no module named '{name}'; give an importable module path (e.g. my_package.my_module) and make sure its folder is on PYTHONPATH") from None


def train(cfg: Config, info: DistInfo, resume: bool, force: bool = False) -> Dict[str, float]:
    out = cfg.output_dir
    ckpt_dir = out / "checkpoints"
    datasets = {split: build_dataset(cfg.data, split) for split in ("train", "val", "test")}
    train_loader = build_train_loader(datasets["train"], cfg.data, info.rank, info.world_size, cfg.seed, info.device)
    val_loader = build_eval_loader(datasets["val"], cfg.data, info.rank, info.world_size, info.device)
    log.info("data '%s': %s samples", cfg.data.name, {k: len(v) for k, v in datasets.items()})

    seed_everything(cfg.seed)  # the same initial weights on every rank and for every world size
    model = build_network(cfg.model)
    total, trainable = count_parameters(model)
    flops = count_flops(model, cfg.model.input_size) if info.is_main else float("nan")
    log.info("network '%s': %.3fM parameters (%.3fM trainable), %.4f GMACs at input %s", cfg.model.name, total / 1e6, trainable / 1e6, flops / 1e9, cfg.model.input_size)
    resume_path = find_resume(ckpt_dir, resume, cfg.train.auto_resume)
    config = to_dict(cfg)  # what checkpoints store and resume guards compare against
    # a changed model or data shape is refused before any weight is loaded, unless --resume-force
    resume_state = init_weights(model, cfg.model, resume_path, lambda state: check_resume_config(state, config, info.world_size, force, resume_path))
    if info.is_main:  # after the resume check: a refused resume keeps the run's config.yaml
        save_config(cfg, out / "config.yaml")
    model.to(info.device)
    if cfg.model.sync_bn:
        model = convert_sync_bn(model, cfg.dist.mode, info.device)
    apply_freeze(model, cfg.model.freeze, cfg.model.freeze_bn)  # after SyncBN conversion, which makes new modules
    optimizer = build_optimizer(model, cfg.optim, info.world_size)
    ema = build_ema(model, cfg.train.ema)  # before amp casts the model: the average stays fp32 at O2/O3
    amp = Amp(cfg.amp, info.device)
    model, optimizer = amp.initialize(model, optimizer)
    model = wrap_model(model, cfg.dist, info)
    seed_everything(cfg.seed, info.rank)  # per-rank streams for augmentation and dropout
    criterion = build_criterion(cfg.loss).to(info.device)
    metric = build_metric(cfg.eval.metric)
    epoch_steps = steps_per_epoch(len(train_loader), cfg.train.accumulate)
    epochs, total_steps = training_length(cfg.train, epoch_steps)
    scheduler = build_scheduler(optimizer, cfg.schedule, epoch_steps, total_steps)
    # A step budget only when the length is given in steps: an epoch-based run resumed with
    # another train.accumulate has a different step count per epoch and still runs its epochs.
    step_limit = total_steps if cfg.train.iterations is not None else None
    # with eval.use_ema the EMA weights are monitored, select best.pt and are tested
    monitor = ("ema_" if cfg.eval.use_ema else "") + cfg.eval.monitor
    options = LoopOptions(
        epochs=epochs, step_limit=step_limit, accumulate=cfg.train.accumulate, clip_grad_norm=cfg.train.clip_grad_norm,
        clip_grad_value=cfg.train.clip_grad_value, log_every=cfg.train.log_every, checkpoint_every_steps=cfg.train.checkpoint_every_steps,
        eval_every=cfg.eval.every, monitor=monitor, show_progress=info.is_main,
    )
    tracker = BestTracker(cfg.eval.monitor, cfg.eval.monitor_mode, cfg.train.patience)
    writer = RunWriter(out, info.is_main)
    trainer = Trainer(
        model, optimizer, scheduler, amp, ema, criterion, metric, train_loader, val_loader, writer, tracker,
        CheckpointStore(ckpt_dir, cfg.train.keep_checkpoints), NonFinitePolicy(cfg.train.nonfinite, cfg.train.max_nonfinite_skips),
        options, info.device, config, info.world_size,
    )
    start_epoch, start_batch, step = 0, 0, 0
    if resume_state is not None:
        start_epoch, step = restore_training_state(resume_state, optimizer, scheduler, amp, ema, tracker)
        start_batch = trainer.resume(resume_state, same_data=not resume_differences(resume_state, config, info.world_size))
        del resume_state
    try:
        trainer.fit(start_epoch, start_batch, step)
        check_replicas(model)
        best_path = ckpt_dir / "best.pt"
        log.info("best %s=%s at epoch %s; testing %s", monitor, tracker.value, tracker.epoch, best_path)
        unwrap(model).load_state_dict(state_dict_of(load_file(best_path)))
        return run_test(cfg, info, model, amp, criterion, writer, epoch=tracker.epoch)
    finally:
        writer.close()


def run_test(cfg: Config, info: DistInfo, model, amp: Amp, criterion, writer: RunWriter, epoch: Optional[int]) -> Dict[str, float]:
    """Evaluate on the test split, log the row, print the metrics (rank 0)."""
    loader = build_eval_loader(build_dataset(cfg.data, "test"), cfg.data, info.rank, info.world_size, info.device)
    metric = build_metric(cfg.eval.metric)
    # eval.save_predictions: the metric's task knows how to write them (each rank its own shard)
    on_batch = metric.prediction_writer(cfg.output_dir / "predictions") if cfg.eval.save_predictions else None
    if cfg.eval.save_predictions and on_batch is None:
        log.warning("eval.save_predictions: metric '%s' writes no predictions", cfg.eval.metric)
    results = evaluate(without_ddp(model), loader, criterion, metric, amp, info.device, len(loader), info.is_main, on_batch=on_batch)
    writer.metrics({"split": "test", "epoch": epoch, **results})
    writer.flush()
    if info.is_main:
        print(f"test: {format_metrics(results)}", flush=True)
    return results


def test(cfg: Config, info: DistInfo, checkpoint: str) -> Dict[str, float]:
    """Single-card (or distributed) evaluation of a checkpoint on the test split."""
    state = load_file(checkpoint)
    model = build_network(cfg.model)
    if "model" not in state:
        raise CheckpointError(f"'{checkpoint}' has no 'model' entry; it is not a checkpoint of this framework")
    try:
        model.load_state_dict(state_dict_of(state))  # the EMA weights when the run selected with them
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint '{checkpoint}' does not fit network '{cfg.model.name}' ({weight_mismatch(model, state_dict_of(state))}); it was saved by another network, see the config it was saved with") from err
    model.to(info.device)
    amp = Amp(cfg.amp, info.device)
    model, _ = amp.initialize(model)  # evaluate at the precision the model was trained with
    criterion = build_criterion(cfg.loss).to(info.device)
    writer = RunWriter(cfg.output_dir, info.is_main)
    try:
        return run_test(cfg, info, model, amp, criterion, writer, epoch=state.get("epoch", 0) - 1)
    finally:
        writer.close()


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    info = None
    try:
        cfg = resolve_config(args)
        if cfg.threads is not None:
            torch.set_num_threads(cfg.threads)  # on a busy CPU, fewer threads stop OpenMP from waiting on each other
        info = init_distributed(cfg.device, cfg.dist.backend, cfg.dist.timeout_s)
        setup_logging(cfg.output_dir, info.rank)
        log.info("framework %s, torch %s, %d process(es), device %s", __version__, torch.__version__, info.world_size, info.device)
        if args.mode == "train":
            train(cfg, info, args.resume or args.resume_force, args.resume_force)
        else:
            test(cfg, info, args.checkpoint)
    except Preempted as stop:
        print(f"stopped: {stop}", file=sys.stderr, flush=True)
        cleanup()
        return PREEMPTED_EXIT
    except UserError as err:
        if args.debug and not is_dist():
            raise
        rank = f"[rank{info.rank}] " if info is not None and info.distributed else ""
        print(f"{rank}error: {err}", file=sys.stderr, flush=True)
        if args.debug:
            traceback.print_exc()
        if is_dist():
            exit_now(2, err)
        return 2
    except Exception as err:  # a bug, often in the user's own code: the traceback names its file and line
        if not is_dist():
            raise
        # One rank failed: report and leave now; waiting in teardown could hang the job.
        print(f"[rank{info.rank}] failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        exit_now(1, err)
    cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
