"""Train or test a registered network: ``python main.py [--config FILE] [key=value ...]``.

Launch the same command under ``torchrun --nproc_per_node=N`` or
``python -m torch.distributed.launch --nproc_per_node=N`` for N processes.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from utils import __version__
from utils.amp import Amp
from utils.build import build_criterion, build_metric, build_network, count_flops, count_parameters
from utils.checkpoint import CheckpointError, atomic_save, load_file, load_weights
from utils.config import Config, ConfigError, load_config, save_config, to_dict
from utils.data import build_dataset, build_eval_loader, build_train_loader
from utils.dist import DistInfo, barrier, cleanup, init_distributed, seed_everything, unwrap
from utils.engine import NonFiniteLossError, evaluate, train_one_epoch
from utils.log import RunWriter, format_metrics, setup_logging
from utils.optim import build_optimizer, build_scheduler

log = logging.getLogger("main")

# Bad input a user can fix: reported as one line, not a traceback (``--debug`` shows it).
USER_ERRORS = (ConfigError, CheckpointError, NonFiniteLossError, FileNotFoundError, KeyError, ValueError, TypeError)


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="experiment YAML file (defaults: utils/config.py)")
    parser.add_argument("--mode", choices=("train", "test"), default="train")
    parser.add_argument("--checkpoint", help="test mode: checkpoint to evaluate (its saved config is the base)")
    parser.add_argument("--resume", action="store_true", help="continue from output/<experiment>/checkpoints/last.pt")
    # torch.distributed.launch passes --local-rank=N (older PyTorch: --local_rank N); torchrun sets LOCAL_RANK.
    parser.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
    parser.add_argument("--debug", action="store_true", help="show tracebacks for input errors")
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")
    args = parser.parse_args(argv)
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
        importlib.import_module(name)
    return cfg


def checkpoint_state(model, optimizer, scheduler, amp: Amp, cfg: Config, epoch: int, step: int, best: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "model": unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "amp": amp.state_dict(),
        "epoch": epoch,
        "global_step": step,
        "best": best,
        "config": to_dict(cfg),
        "version": __version__,
    }


def train(cfg: Config, info: DistInfo, resume: bool) -> Dict[str, float]:
    out = cfg.output_dir
    ckpt_dir = out / "checkpoints"
    if info.is_main:
        save_config(cfg, out / "config.yaml")
    datasets = {split: build_dataset(cfg.data, split) for split in ("train", "val", "test")}
    train_loader = build_train_loader(datasets["train"], cfg.data, info.rank, info.world_size, cfg.seed)
    val_loader = build_eval_loader(datasets["val"], cfg.data, info.rank, info.world_size)
    log.info("data '%s': %s samples", cfg.data.name, {k: len(v) for k, v in datasets.items()})

    seed_everything(cfg.seed)  # the same initial weights on every rank and for every world size
    model = build_network(cfg.model)
    total, trainable = count_parameters(model)
    flops = count_flops(model, cfg.model.input_size) if info.is_main else float("nan")
    log.info("network '%s': %.3fM parameters (%.3fM trainable), %.4f GMACs at input %s", cfg.model.name, total / 1e6, trainable / 1e6, flops / 1e9, cfg.model.input_size)
    if cfg.model.pretrained:
        load_weights(model, cfg.model.pretrained, cfg.model.pretrained_prefix, cfg.model.pretrained_strict)
    model.to(info.device)
    optimizer = build_optimizer(model, cfg.optim, info.world_size)
    amp = Amp(cfg.amp, info.device)
    model, optimizer = amp.initialize(model, optimizer)
    if info.distributed:
        device_ids = [info.device.index] if info.device.type == "cuda" else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=cfg.dist.find_unused_parameters, static_graph=cfg.dist.static_graph)
    seed_everything(cfg.seed, info.rank)  # per-rank streams for augmentation and dropout
    criterion = build_criterion(cfg.loss).to(info.device)
    metric = build_metric(cfg.eval.metric)
    iters_per_epoch = max(len(train_loader) // cfg.train.accumulate, 1)
    scheduler = build_scheduler(optimizer, cfg.schedule, iters_per_epoch, iters_per_epoch * cfg.train.epochs)

    start_epoch, step, best = 0, 0, {"metric": cfg.eval.monitor, "value": None, "epoch": None}
    if resume or cfg.train.auto_resume:
        last = ckpt_dir / "last.pt"
        if last.is_file():
            state = load_file(last)
            unwrap(model).load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            amp.load_state_dict(state["amp"])
            start_epoch, step, best = state["epoch"], state["global_step"], state["best"]
            log.info("resumed from %s at epoch %d (step %d)", last, start_epoch, step)
        elif resume:
            raise CheckpointError(f"--resume: no checkpoint at '{last}'; train without --resume first")

    writer = RunWriter(out, info.is_main)
    sign = 1.0 if cfg.eval.monitor_mode == "max" else -1.0
    try:
        for epoch in range(start_epoch, cfg.train.epochs):
            train_loader.sampler.set_epoch(epoch)
            stats = train_one_epoch(
                model, train_loader, criterion, optimizer, scheduler, amp, info.device, epoch, step, writer,
                num_batches=len(train_loader), accumulate=cfg.train.accumulate, clip_grad_norm=cfg.train.clip_grad_norm,
                clip_grad_value=cfg.train.clip_grad_value, log_every=cfg.train.log_every, show_progress=info.is_main,
            )
            step = int(stats.pop("global_step"))
            log.info("epoch %d train: %s", epoch, format_metrics(stats))
            is_best = False
            if (epoch + 1) % cfg.eval.every == 0 or epoch + 1 == cfg.train.epochs:
                results = evaluate(model, val_loader, criterion, metric, amp, info.device, len(val_loader), info.is_main)
                log.info("epoch %d val: %s", epoch, format_metrics(results))
                writer.scalars("val", results, epoch)
                writer.metrics({"split": "val", "epoch": epoch, **results})
                value = results[cfg.eval.monitor]
                is_best = best["value"] is None or sign * value > sign * best["value"]
                if is_best:
                    best.update(value=value, epoch=epoch)
            if info.is_main:
                state = checkpoint_state(model, optimizer, scheduler, amp, cfg, epoch + 1, step, best)
                atomic_save(state, ckpt_dir / "last.pt")
                if is_best:
                    atomic_save(state, ckpt_dir / "best.pt")
            barrier()
        best_path = ckpt_dir / "best.pt"
        log.info("best %s=%s at epoch %s; testing %s", best["metric"], best["value"], best["epoch"], best_path)
        unwrap(model).load_state_dict(load_file(best_path)["model"])
        return run_test(cfg, info, model, amp, criterion, writer, epoch=best["epoch"])
    finally:
        writer.close()


def run_test(cfg: Config, info: DistInfo, model, amp: Amp, criterion, writer: RunWriter, epoch: Optional[int]) -> Dict[str, float]:
    """Evaluate on the test split, log the row, print the metrics (rank 0)."""
    loader = build_eval_loader(build_dataset(cfg.data, "test"), cfg.data, info.rank, info.world_size)
    results = evaluate(model, loader, criterion, build_metric(cfg.eval.metric), amp, info.device, len(loader), info.is_main)
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
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint '{checkpoint}' does not fit network '{cfg.model.name}': {str(err).splitlines()[0]} (see the config it was saved with)") from err
    model.to(info.device)
    amp = Amp(cfg.amp, info.device)
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
            train(cfg, info, args.resume)
        else:
            test(cfg, info, args.checkpoint)
        return 0
    except USER_ERRORS as err:
        if args.debug:
            raise
        message = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        rank = f"[rank{info.rank}] " if info is not None and info.distributed else ""
        print(f"{rank}error: {message}", file=sys.stderr, flush=True)
        return 2
    finally:
        cleanup()


if __name__ == "__main__":
    sys.exit(main())
