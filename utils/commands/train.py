"""``--mode train`` (the default): one run, top to bottom, as docs/architecture.md's "Flow of one run" tells it.

``run``: the start (the config checked whole, the process group, the config's own rules: ``started.py``), the
sweep's trial this run reports to (``--trial``), the run's folder (new, or the run ``--resume`` continues), then
``train``: the data and loaders, the network, the weights it starts from, the optimizer, amp and DDP or FSDP,
the loss, the schedule, the Trainer's services and hooks; the training state restored, ``fit``, and the test of
the best checkpoint. The result line is ``test: k=v ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from utils.amp import Amp
from utils.checkpoint.guard import ResumeChoices, check_resume
from utils.checkpoint.restore import load_eval_weights, load_initial_weights
from utils.checkpoint.start_point import start_point
from utils.commands.command_line import Command
from utils.commands.diverged import diverged
from utils.commands.options import ModeParser, add_config, add_print_config, add_trust_file
from utils.commands.start import OpenedRun, StartPlan
from utils.commands.started import opened, prepare, print_config, report
from utils.commands.test import run_test
from utils.config.given import decides, given_keys
from utils.config.schema import Config, save_config
from utils.data import build_dataset, build_eval_loader, build_train_loader, with_process_batch
from utils.data.input_shape import check_input_shape, check_task, first_input
from utils.data.shape_from_data import check_classes, fill_from_data, settle_images
from utils.distributed.fsdp import shard_model
from utils.distributed.parallel import convert_sync_bn, wrap_model
from utils.distributed.process_group import DistInfo
from utils.distributed.replicas import check_replicas
from utils.distributed.seed import seed_everything
from utils.engine.trainer import Trainer
from utils.engine.trainer_setup import build_hooks, build_services, loop_options, run_meta
from utils.engine.trainer_types import Parts
from utils.engine.training_length import check_takes_steps, steps_per_epoch, training_length
from utils.errors import NonFiniteError, one_line
from utils.log import best_line
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
from utils.secret_text import hide
from utils.sweep.pruning import Judge, TrialRef, pruning_judge
from utils.sweep.spec import PRUNERS
from utils.trackers.left_behind import warn_left_behind

log = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    """The start, the sweep's trial, the run's folder, then ``train``; its result line is ``test: k=v ...``."""
    if args.print_config:
        return print_config(args, "train")
    start = prepare(args, "train")
    trial = trial_of(args)
    judge = pruning_judge(trial)  # the sweep's trial, checked before the folder is made
    choices = ResumeChoices(args.resume_force, args.reset_optimizer)
    given = given_keys(args.config, args.overrides)  # what the data may not decide (utils/data/shape_from_data.py)
    with opened(start, args.resume) as started:
        results, best = train(start.cfg, start.info, started, choices, start.plan, (judge, trial), given)
        report("test", results, start, started.folder, best)
    return 0


def train(
    cfg: Config,
    info: DistInfo,
    opened: OpenedRun,  # the run's folder, and the checkpoint it continues from
    choices: ResumeChoices,
    plan: StartPlan,  # made before the run folder existed
    # the sweep's pruner, asked after each validation, and its trial, which trackers file the run under
    sweep: Tuple[Optional[Judge], Optional[TrialRef]] = (None, None),
    given: FrozenSet[str] = frozenset(),  # the keys the config sets: the data decides the others it can
) -> Tuple[Dict[str, float], str]:
    """Build everything in the order of docs/architecture.md's "Flow of one run", start where the opened run
    continues (its start point), fit, and test the best checkpoint; the test's metrics and the ``best_line``."""
    run = opened.folder
    compiling, sharding, policy = plan.compiling, cfg.dist.mode == "fsdp", plan.policy
    # the batch of one process (data.global_batch_size / world size)
    train_data = with_process_batch(cfg.data, info.world_size)
    if cfg.train.overwrite:
        log.warning(
            "train.overwrite is no longer needed: every fresh run writes into a folder of its own (%s)", run.path
        )
    datasets = build_splits(cfg)
    settled = settle_images(cfg, given, datasets["train"]) if decides(cfg.data.name) else {}
    if settled:
        datasets = build_splits(cfg)  # grey images as one channel, a folder of mixed sizes at one size
    log.info("data '%s': %s samples", cfg.data.name, {k: len(v) for k, v in datasets.items()})
    if decides(cfg.data.name):  # what the config leaves out: the classes, channels and size the data has
        check_task(datasets["val"], cfg.eval.metric, (cfg.data.name, str(cfg.data.root)))
        fill_from_data(cfg, given, datasets["train"], first_input(datasets["val"]), settled)
    check_classes(cfg, getattr(datasets["train"], "num_classes", None), getattr(datasets["train"], "classes", None))
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
    judge, trial = sweep
    # what checkpoints store and resume guards compare against
    meta = dataclasses.replace(run_meta(cfg, datasets["train"]), trial=trial)
    # the resume, in one call: a changed model, data or optimizer type is refused before any weight is loaded
    resumed = start_point(
        opened.chosen,
        lambda ckpt: check_resume(ckpt, meta.config, meta.data, info.world_size, choices),
        choices.reset_optimizer,
    )
    load_initial_weights(model, cfg.model, resumed)
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
    epochs, total_steps = training_length(cfg.train, epoch_steps, None if resumed is None else resumed.progress)
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
    services = build_services(cfg, info, run, val_loader, plan.monitor_mode, judge)
    trainer = Trainer(
        parts, loop_options(cfg, epochs, total_steps), services, build_hooks(cfg, run, training=True), info, meta
    )
    try:
        if resumed is not None:
            trainer.start_from(resumed)
        del resumed  # the optimizer state it held is copied; free it before training
        if info.is_main:  # once the resume is accepted and restored: a refused one keeps the run's config.yaml
            save_config(cfg, run.config)
            warn_left_behind(run.path, cfg.hooks)  # a tracker the run logged to, left out of this resume
        try:
            result = trainer.fit()
        except NonFiniteError as err:  # the step, the checkpoints kept, the fixes that fit this run's settings
            what = one_line(err)
            raise NonFiniteError(
                diverged(what, run, cfg.optim.lr, cfg.train.clip_grad_norm, cfg.amp.opt_level)
            ) from None
        check_replicas(model)
        best = best_line(result.monitor, result.best_value, result.best_epoch)
        log.info("%s; testing %s", best, result.best_path)
        load_eval_weights(model, result.best_path)
        return run_test(cfg, run, trainer, datasets["test"], result.best_epoch), best
    finally:
        trainer.close()


def build_splits(cfg: Config) -> Dict[str, Any]:
    """The train, val and test datasets, labelled by one class list (the train split's: one label per class)."""
    datasets = {"train": build_dataset(cfg.data, "train")}
    classes = getattr(datasets["train"], "classes", None)
    datasets.update({split: build_dataset(cfg.data, split, classes) for split in ("val", "test")})
    return datasets


CONFIG_KEYS = frozenset(field.name for field in dataclasses.fields(Config))


def is_override(item: str) -> bool:
    """``key.sub=value`` whose first name is a config key: an override, never a run or checkpoint's name."""
    key, equals, _ = item.partition("=")
    return bool(equals) and key.split(".")[0].strip() in CONFIG_KEYS


def resume_alone(argv: List[str]) -> List[str]:
    """``--resume`` directly followed by an override names no run: it becomes ``--resume=`` (the newest run) and
    the override stays in its place among the others (``--resume train.epochs=3`` continues with 3 epochs)."""
    return [
        "--resume=" if item == "--resume" and index + 1 < len(argv) and is_override(argv[index + 1]) else item
        for index, item in enumerate(argv)
    ]


def _run_named(value: str) -> object:
    return value or True  # "--resume=": no run named, the newest


def add_options(parser: ModeParser) -> None:
    add_config(parser)
    parser.add_argument(
        "--resume",
        nargs="?",
        const=True,
        default=False,
        type=_run_named,
        metavar="RUN_OR_CHECKPOINT",
        help="continue the experiment's newest run (output/<experiment>/latest), or the run folder or checkpoint "
        "given right after --resume (a key=value there is an override)",
    )
    parser.add_argument(
        "--resume-force", action="store_true", help="resume even though the model or data config changed"
    )
    parser.add_argument(
        "--reset-optimizer",
        action="store_true",
        help="resume without the optimizer state (needed when optim.name changed)",
    )
    add_trust_file(parser)
    add_print_config(parser)
    # the sweep's trial this run reports its validations to (--sweep passes them to each run it starts)
    parser.add_argument("--trial", type=int, metavar="N", help="sweep: the number of the study's trial to report to")
    parser.add_argument("--trial-study", metavar="NAME", help="sweep: the study's name (with --trial)")
    parser.add_argument("--trial-storage", metavar="URL", help="sweep: the study's journal file or database URL")
    parser.add_argument(
        "--trial-step-offset", type=int, metavar="N", help="sweep: the step this run's epoch 0 reports at (default 0)"
    )
    parser.add_argument("--trial-pruner", choices=PRUNERS, help="sweep: the study's pruner (default none)")


def check(parser: ModeParser, args: argparse.Namespace) -> None:
    """``--resume-force`` and ``--reset-optimizer`` resume; a sweep's trial is named whole, or not at all."""
    args.resume = args.resume or args.resume_force or args.reset_optimizer
    trial = {"--trial": args.trial, "--trial-study": args.trial_study, "--trial-storage": args.trial_storage}
    given = [option for option, value in trial.items() if value is not None]
    how = args.trial_step_offset is not None or args.trial_pruner is not None  # how it reports: with a trial only
    if (given or how) and len(given) < len(trial):
        missing = [option for option in trial if option not in given]
        parser.error(
            f"{' and '.join(missing)} missing: --trial, --trial-study and --trial-storage name a sweep's trial "
            "together (--sweep passes them to each run it starts)"
        )


def trial_of(args: argparse.Namespace) -> Optional[TrialRef]:
    if args.trial is None:
        return None
    return TrialRef(
        hide(args.trial_storage),  # a database password: shown masked (utils/secret_text.py)
        args.trial_study,
        args.trial,
        args.trial_step_offset or 0,
        args.trial_pruner or "none",
    )


INSTEAD_OF_CHECKPOINT = (
    "; training never starts from it: to start from its weights use model.pretrained=FILE, to continue its run "
    "use --resume FILE"
)
COMMAND = Command(
    "--mode train",
    "train",
    "train the config's network in a run folder of its own (or continue one: --resume), then test its best checkpoint",
    add_options,
    run,
    check,
    {"--checkpoint": INSTEAD_OF_CHECKPOINT},
    resume_alone,
)
