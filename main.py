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
from typing import List, Optional

# OpenMP reads how long a waiting thread spins once, when torch loads it: briefly, then it sleeps instead of
# taking a core another process needs (7x slower beside another torch job otherwise: utils/threads.py)
if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ):  # a user's own setting stays
    os.environ["GOMP_SPINCOUNT"] = "3000"

import torch

from utils import __version__
from utils.checkpoint.guard import ResumeChoices
from utils.checkpoint.safe_load import trust_files
from utils.checkpoint.saved_config import how_to_import, not_imported
from utils.checkpoint.state import Checkpoint
from utils.commands.cli import command_line, resolve_config
from utils.commands.export import export_checkpoint
from utils.commands.pack import pack_command
from utils.commands.predict import predict_checkpoint
from utils.commands.sweep import sweep_command
from utils.commands.test import test_checkpoint
from utils.commands.train import train
from utils.compare.command import compare_command
from utils.distributed.determinism import make_deterministic
from utils.distributed.ops import is_dist
from utils.distributed.preempt import PREEMPTED_EXIT, Preempted
from utils.distributed.process_group import (
    PEER_GRACE_S,
    cleanup,
    exit_now,
    init_distributed,
)
from utils.errors import UserError, one_line
from utils.log import format_metrics, setup_logging
from utils.start import open_run, plan_start
from utils.threads import apply_threads, choose_threads, describe

log = logging.getLogger("main")


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    return command_line(argv, __doc__)


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
