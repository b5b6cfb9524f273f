"""Train, test, predict with or export a registered network: ``python main.py [--mode MODE] [--config FILE] [key=value ...]``.

Launch the same command under ``torchrun --nproc_per_node=N`` or
``python -m torch.distributed.launch --nproc_per_node=N`` for N processes.

Exit codes: 0 done; 2 bad input (a ``UserError``: one ``error:`` line); 143 stopped by
SIGTERM/SIGINT after writing a checkpoint (resume with ``--resume``); 1 any other
failure, with its traceback (under torchrun prefixed with the failing rank).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Dict, List, Optional, Tuple

# OpenMP reads how long a waiting thread spins once, when torch loads it: briefly, then it sleeps instead of
# taking a core another process needs (7x slower beside another torch job otherwise: utils/threads.py)
if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ):  # a user's own setting stays
    os.environ["GOMP_SPINCOUNT"] = "3000"

import torch

from utils import __version__
from utils.amp import Amp
from utils.checkpoint.guard import ResumeChoices, check_resume
from utils.checkpoint.records import ValidationRecord
from utils.checkpoint.restore import load_eval_weights, load_initial_weights
from utils.checkpoint.safe_load import trust_files
from utils.checkpoint.saved_config import how_to_import, not_imported
from utils.checkpoint.state import Checkpoint
from utils.compare.command import compare_command
from utils.config import Config, save_config
from utils.data import build_dataset, build_eval_loader, build_train_loader, with_process_batch
from utils.data.input_shape import check_input_shape
from utils.distributed.determinism import make_deterministic
from utils.distributed.fsdp import shard_model
from utils.distributed.ops import is_dist
from utils.distributed.parallel import convert_sync_bn, wrap_model
from utils.distributed.preempt import PREEMPTED_EXIT, Preempted
from utils.distributed.process_group import (
    PEER_GRACE_S,
    DistInfo,
    cleanup,
    exit_now,
    init_distributed,
)
from utils.distributed.replicas import check_replicas
from utils.distributed.seed import seed_everything
from utils.engine.cli import command_line, resolve_config
from utils.engine.export import export_checkpoint
from utils.engine.pack import pack_command
from utils.engine.predict import predict_checkpoint
from utils.engine.test_mode import run_test, test_checkpoint
from utils.engine.trainer import Trainer
from utils.engine.trainer_setup import build_hooks, build_services, loop_options, run_meta
from utils.engine.trainer_types import Parts
from utils.engine.training_length import check_takes_steps, steps_per_epoch, training_length
from utils.errors import UserError, one_line
from utils.log import format_metrics, setup_logging
from utils.metrics import build_metric
from utils.metrics.extra import check_extra_classes
from utils.model.build import build_network
from utils.model.compile import compile_model
from utils.model.criterion import build_criterion
from utils.model.memory_format import to_channels_last
from utils.model.summary import has_batchnorm, log_summary
from utils.optim.ema import build_ema
from utils.optim.freeze import apply_freeze
from utils.optim.optimizers import build_optimizer
from utils.optim.schedules import build_scheduler
from utils.run_folder import RunFolder
from utils.start import StartPlan, open_run, plan_start
from utils.threads import apply_threads, choose_threads, describe

log = logging.getLogger("main")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    return command_line(argv, __doc__)


def train(
    cfg: Config,
    info: DistInfo,
    run: RunFolder,
    resume: Tuple[Optional[Path], Optional[ValidationRecord]],
    choices: ResumeChoices,
    plan: StartPlan,  # main() made it before the run folder existed
) -> Dict[str, float]:
    compiling, sharding, policy = plan.compiling, cfg.dist.mode == "fsdp", plan.policy
    # the batch of one process (data.global_batch_size / world size)
    train_data = with_process_batch(cfg.data, info.world_size)
    if cfg.train.overwrite:
        log.warning(
            "train.overwrite is no longer needed: every fresh run writes into a folder of its own (%s)", run.path
        )
    datasets = {"train": build_dataset(cfg.data, "train")}
    classes = getattr(datasets["train"], "classes", None)  # one class list (one label per class) for every split
    datasets.update({split: build_dataset(cfg.data, split, classes) for split in ("val", "test")})
    log.info("data '%s': %s samples", cfg.data.name, {k: len(v) for k, v in datasets.items()})
    # the data's task against eval.metric, a sample's dimensions and channels against model.input_size
    check_input_shape(datasets["val"], cfg.model.input_size, cfg.eval.metric)
    # an entry's own num_classes against the data's
    check_extra_classes(cfg.eval.extra_metrics, getattr(datasets["train"], "num_classes", None))

    seed_everything(cfg.seed)  # the same initial weights on every rank and for every world size
    model = build_network(cfg.model)
    log_summary(model, cfg.model.name, cfg.model.input_size, count_macs=info.is_main)
    channels_last, batchnorm = cfg.model.channels_last, has_batchnorm(model)
    train_loader = build_train_loader(
        datasets["train"], train_data, info.rank, info.world_size, cfg.seed, info.device, channels_last, batchnorm
    )
    check_takes_steps(
        len(train_loader),
        len(getattr(train_loader, "sampler", datasets["train"])),
        train_data.batch_size,
        cfg.data.drop_last,
        batchnorm,
    )
    val_loader = build_eval_loader(datasets["val"], cfg.data, info.rank, info.world_size, info.device, channels_last)
    meta = run_meta(cfg, datasets["train"])  # what checkpoints store and resume guards compare against
    # a changed model, data or optimizer type is refused before any weight is loaded (guard.py)
    resumed = load_initial_weights(
        model,
        cfg.model,
        *resume,
        lambda ckpt: check_resume(ckpt, meta.config, meta.data, info.world_size, choices),
        choices.reset_optimizer,
    )
    model.to(info.device)
    if cfg.model.channels_last:
        to_channels_last(model)
    if cfg.model.sync_bn:
        model = convert_sync_bn(model, cfg.dist.mode, info.device)
    apply_freeze(model, cfg.model.freeze, cfg.model.freeze_bn)  # after SyncBN conversion, which makes new modules
    # dist.mode=fsdp: before the optimizer sees the parameters
    model = shard_model(model, cfg, policy, info.distributed)
    optimizer = build_optimizer(model, cfg.optim, info.world_size)
    ema = build_ema(model, cfg.train.ema)  # before amp casts the model: the average stays fp32 at O2/O3
    amp = Amp(cfg.amp, info.device, sharding, policy)
    model, optimizer = amp.initialize(model, optimizer)
    model = compile_model(model, compiling)  # in place, before DDP (PyTorch's advice)
    model = wrap_model(model, cfg.dist, info)
    seed_everything(cfg.seed, info.rank)  # per-rank streams for augmentation and dropout
    criterion = build_criterion(cfg.loss, cfg.model.prediction_key).to(info.device)
    epoch_steps = steps_per_epoch(len(train_loader), cfg.train.accumulate)
    epochs, total_steps = training_length(cfg.train, epoch_steps, resumed.progress if resumed is not None else None)
    scheduler = build_scheduler(optimizer, cfg.schedule, epoch_steps, total_steps)
    parts = Parts(
        model,
        criterion,
        amp,
        optimizer,
        scheduler,
        train_loader,
        build_metric(cfg.eval.metric, cfg.eval.extra_metrics, meta.num_classes),
        ema,
    )
    services = build_services(
        cfg, info, run, val_loader, resumed.checkpoint.progress.step if resumed is not None else None, plan.monitor_mode
    )
    trainer = Trainer(
        parts, loop_options(cfg, epochs, total_steps), services, build_hooks(cfg, run, training=True), info, meta
    )
    try:
        if resumed is not None:
            trainer.start_from(resumed.restore(trainer.state_objects(), info))
            del resumed  # the optimizer state it held is copied; free it before training
        if info.is_main:  # once the resume is accepted and restored: a refused one keeps the run's config.yaml
            save_config(cfg, run.config)
        result = trainer.fit()
        check_replicas(model)
        log.info(
            "best %s=%s at epoch %s; testing %s", result.monitor, result.best_value, result.best_epoch, result.best_path
        )
        load_eval_weights(model, result.best_path)
        return run_test(cfg, run, trainer, datasets["test"], result.best_epoch)
    finally:
        trainer.close()


def sweep_command(args: argparse.Namespace) -> int:
    """``--sweep``: the trials run as child processes of this one, which holds no process group and no device."""
    from utils.sweep.driver import default_build, run_sweep

    setup_logging(None, 0)
    return run_sweep(args.sweep, args.config, args.overrides, default_build(args.config, args.overrides))


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    info, run = None, None
    try:
        if args.sweep:  # its trials are child processes: this one holds no process group and no device
            return sweep_command(args)
        if args.mode == "compare":  # finished runs' files only: no config, no process group, no device
            return compare_command(args.paths, args.output, args.overrides)
        if args.mode == "pack":  # the dataset's files only: no process group, no device, no run folder
            return pack_command(args)
        trust_files(args.trust_file)  # every other file loads weights-only: loading never runs code
        checkpoint = Checkpoint.load(args.checkpoint) if args.mode != "train" else None
        cfg = resolve_config(args, checkpoint)
        threads = choose_threads(cfg.threads)
        apply_threads(threads)
        info = init_distributed(cfg.device, cfg.dist.backend, cfg.dist.timeout_s)
        kernels = make_deterministic(info.device, cfg.deterministic)
        setup_logging(None, info.rank)  # the console, until the run's folder is known
        plan = plan_start(cfg, info, args.mode)  # the config's own rules, before any folder is made
        opened = open_run(
            cfg, info, args.mode, args.resume, args.output if args.mode in ("predict", "export") else None
        )
        run = opened.folder
        setup_logging(run.log, info.rank)
        log.info(
            "framework %s, torch %s, %d process(es) (launcher: %s), device %s%s, %s; run folder %s",
            __version__,
            torch.__version__,
            info.world_size,
            info.launcher,
            info.device,
            "".join(f" ({part})" for part in (info.backend, kernels) if part),
            describe(threads),
            run.path,
        )
        left_out = not_imported(checkpoint, cfg)
        if left_out:
            log.warning("%s", how_to_import(left_out, args.mode))
        if args.mode == "train":
            results = train(
                cfg,
                info,
                run,
                (opened.checkpoint, opened.record),
                ResumeChoices(args.resume_force, args.reset_optimizer),
                plan,
            )
        elif args.mode == "test":
            results = test_checkpoint(cfg, info, run, checkpoint)
        else:
            results = (
                predict_checkpoint(cfg, info, run, checkpoint, args.input)
                if args.mode == "predict"
                else export_checkpoint(cfg, run, checkpoint, args.format)
            )
        if info.is_main:
            print(f"{'test' if args.mode == 'train' else args.mode}: {format_metrics(results)}", flush=True)
    except Preempted as stop:
        print(f"stopped: {stop}", file=sys.stderr, flush=True)
        cleanup()
        return PREEMPTED_EXIT
    except UserError as err:
        if run is not None and info.is_main:  # a start stopped before any result leaves no folder (utils/run_folder.py)
            setup_logging(None, info.rank)  # its log file closed first
            run.abandon()
        if args.debug and not is_dist():
            raise
        rank = f"[rank{info.rank}] " if info is not None and info.distributed else ""
        print(f"{rank}error: {one_line(err)}", file=sys.stderr, flush=True)
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
        exit_now(1, err, wait_s=PEER_GRACE_S)  # it may be a consequence of a peer's failure: let that be named
    finally:
        if run is not None:  # in-process callers (tests) run again; a process that ends loses its lock anyway
            run.release()
    cleanup()
    return 0


def in_a_job() -> bool:
    """Whether this process is one of several (torchrun, srun and hand-set launches write WORLD_SIZE)."""
    size = os.environ.get("WORLD_SIZE", "1")
    return size.isdigit() and int(size) > 1


if __name__ == "__main__":
    code = main()
    if in_a_job():
        # Done and out of the process group: a job's process ends without the interpreter's teardown, in which
        # torch's C++ threads now and then abort ("terminate called without an active exception", exit -6: about
        # 1 in 5 resumed 3-rank FSDP runs on a busy CPU) and the launcher reports a finished job as failed.
        exit_now(code)
    sys.exit(code)
