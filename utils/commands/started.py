"""How a mode that runs in a process group starts and ends (train, test, predict, export), in this order:

1. ``prepare``: the files to trust, the checkpoint read (test, predict, export), the config resolved and every
   name in it checked, CPU threads, the process group, the kernels, console logging, and every rule of the config
   that needs no data (``utils/commands/start.py``: ``plan_start``), all before any folder exists;
2. ``opened``: the run's folder (``open_run``: a new one, or the training run to continue), its log and the
   start line; a start that bad input stops takes back the folder it made (``RunFolder.abandon``), while a run
   that trained and then diverged keeps it, marked failed (``utils/run/failed.py``);
3. ``report``: the result line that scripts read (``test: k=v ...``, ``predict: ...``), then the closing line
   (``done in T; [best ...; ]run folder PATH``).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from typing import Callable, Iterator, NamedTuple, Optional, Tuple, Union

import torch

from utils import __version__
from utils.checkpoint.safe_load import trust_files
from utils.checkpoint.saved_config import checkpoint_base, how_to_import, not_imported
from utils.checkpoint.state import Checkpoint
from utils.commands.start import OpenedRun, StartPlan, open_run, plan_start
from utils.config.load import load_config
from utils.config.schema import Config, config_yaml
from utils.distributed.determinism import make_deterministic
from utils.distributed.process_group import DistInfo, cleanup, init_distributed
from utils.errors import RegistryError, UserError, one_line
from utils.log import closing_line, format_metrics, setup_logging, to_log_file
from utils.references import check_references, import_custom
from utils.run.failed import check_not_failed, clear_failed, keeps_folder, mark_failed
from utils.run.folder import RunFolder
from utils.threads import Threads, apply_threads, choose_threads, describe
from utils.torchvision_check import check_torchvision

log = logging.getLogger(__name__)


class Start(NamedTuple):
    """What ``prepare`` made: the mode, its config, this process's place in the job, the config's plan, the
    checkpoint the mode reads (None in training), and what the start line says of threads and kernels."""

    mode: str
    cfg: Config
    info: DistInfo
    plan: StartPlan
    checkpoint: Optional[Checkpoint]
    threads: Threads
    kernels: str
    began: float  # time.monotonic() when prepare began: the closing line's wall time


def resolve_config(
    args: argparse.Namespace,
    mode: str,
    checkpoint: Optional[Checkpoint],
    view: Optional[Callable[[Config], Config]] = None,
) -> Config:
    """``--config`` and the overrides on the config a checkpoint saved (``checkpoint_base``: test, predict and
    export start from it). Only the user's ``custom_imports`` are imported; then every name is checked, in the
    mode's ``view`` of the config (predict reads some ``data.args`` itself, whatever the dataset takes). A torchvision
    of another build than torch is one error line here, before anything imports it (``utils/torchvision_check.py``)."""
    check_torchvision()
    cfg = load_config(args.config, args.overrides, base=checkpoint_base(checkpoint) if checkpoint is not None else None)
    import_custom(cfg.custom_imports, [cfg.experiment.output_root])
    try:  # the registries know the custom imports' names now
        check_references(view(cfg) if view is not None else cfg)
    except RegistryError as err:
        left_out = not_imported(checkpoint, cfg)
        if not left_out:
            raise
        raise RegistryError(f"{one_line(err)}; {how_to_import(left_out, mode)}") from None
    return cfg


def read_config(
    args: argparse.Namespace, mode: str, view: Optional[Callable[[Config], Config]] = None
) -> Tuple[Optional[Checkpoint], Config]:
    """The checkpoint the mode reads (None in training) and the config resolved on it, every name checked."""
    trust_files(args.trust_file)  # every other file loads weights-only: loading never runs code
    if mode != "train" and args.checkpoint:
        check_not_failed(args.checkpoint)  # latest -> a run that diverged before its first checkpoint
    checkpoint = Checkpoint.load(args.checkpoint) if mode != "train" else None
    return checkpoint, resolve_config(args, mode, checkpoint, view)


def print_config(args: argparse.Namespace, mode: str, view: Optional[Callable[[Config], Config]] = None) -> int:
    """``--print-config``: the config ``prepare`` would resolve, as the YAML a run's config.yaml holds; exit 0 before
    any thread setting, process group, folder or data."""
    print(config_yaml(read_config(args, mode, view)[1]), end="", flush=True)
    return 0


def prepare(args: argparse.Namespace, mode: str, view: Optional[Callable[[Config], Config]] = None) -> Start:
    """Everything a start decides before a folder exists; a UserError here leaves nothing behind."""
    began = time.monotonic()
    checkpoint, cfg = read_config(args, mode, view)
    threads = choose_threads(cfg.threads)
    apply_threads(threads)
    info = init_distributed(cfg.device, cfg.dist.backend, cfg.dist.timeout_s)
    kernels = make_deterministic(info.device, cfg.deterministic)
    setup_logging(None, info.rank)  # the console, until the run's folder is known
    plan = plan_start(cfg, info, mode)  # the config's own rules, before any folder is made
    return Start(mode, cfg, info, plan, checkpoint, threads, kernels, began)


@contextlib.contextmanager
def opened(start: Start, resume: Union[bool, str] = False, output: Optional[str] = None) -> Iterator[OpenedRun]:
    """The run's folder for the block, its log and the start line; released after it, taken back when bad input
    stopped the block before any result; the process group left when the block ended well."""
    info = start.info
    run = open_run(start.cfg, info, start.mode, resume, output)
    try:
        setup_logging(run.folder.log, info.rank)
        log.info(
            "framework %s, torch %s, %d process(es) (launcher: %s), device %s%s, %s; run folder %s%s",
            __version__,
            torch.__version__,
            info.world_size,
            info.launcher,
            info.device,
            "".join(f" ({part})" for part in (info.backend, start.kernels) if part),
            describe(start.threads),
            run.folder.path,
            run.why,  # why --resume alone continues this run
        )
        left_out = not_imported(start.checkpoint, start.cfg)
        if left_out:
            log.warning("%s", how_to_import(left_out, start.mode))
        if start.mode == "train" and info.is_main:  # a failed run continued by name trains again
            clear_failed(run.folder)
        yield run
    except UserError as err:
        if info.is_main:  # a start stopped before any result leaves no folder (utils/run/folder.py)
            setup_logging(None, info.rank)  # its log file closed first
            if keeps_folder(err):  # a run that trained, then failed: its folder tells what happened
                mark_failed(run.folder, one_line(err))
            else:
                run.folder.abandon(run.adopted)
        raise
    finally:  # in-process callers (tests) run again; a process that ends loses its lock anyway
        run.folder.release()
    cleanup()


def report(label: str, results: dict, start: Start, folder: RunFolder, best: Optional[str] = None) -> None:
    """The result line (rank 0), ``<label>: k=v ...`` (on stdout and in log.txt), then the closing line: the wall time since ``prepare``, a
    training run's ``best`` and the folder holding what the run wrote."""
    if start.info.is_main:
        line = f"{label}: {format_metrics(results)}"
        print(line, flush=True)
        to_log_file(line)  # the run's log.txt tells the whole story
        log.info("%s", closing_line(folder.path, time.monotonic() - start.began, best))
