"""Train, test, predict with or export a registered network: ``python main.py [--mode MODE] [--config FILE] [key=value ...]``.

Launch the same command under ``torchrun --nproc_per_node=N`` or
``python -m torch.distributed.launch --nproc_per_node=N`` for N processes.

Exit codes: 0 done; 2 bad input (a ``UserError``: one ``error:`` line); 143 stopped by
SIGTERM/SIGINT after writing a checkpoint (resume with ``--resume``); 1 any other
failure, with its traceback (under torchrun prefixed with the failing rank).
"""

from __future__ import annotations

import errno
import os
import sys
import traceback
from typing import List, NoReturn, Optional

# OpenMP reads how long a waiting thread spins once, when torch loads it: briefly, then it sleeps instead of
# taking a core another process needs (7x slower beside another torch job otherwise: utils/threads.py)
if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ):  # a user's own setting stays
    os.environ["GOMP_SPINCOUNT"] = "3000"

from utils.commands.command_line import parse_command_line  # noqa: E402  (after the OpenMP setting)
from utils.distributed.preempt import PREEMPTED_EXIT, Preempted  # noqa: E402
from utils.errors import ConfigError, UserError, one_line  # noqa: E402


def main(argv: Optional[List[str]] = None) -> int:
    """Parse the mode's command line, run its command (``utils/commands/``) and turn what stopped it into an exit
    code: bad input is one ``error:`` line (exit 2), anything else its traceback."""
    command, args = parse_command_line(argv, __doc__)
    try:
        try:
            return command.run(args)
        except OSError as err:
            if err.errno != errno.ENAMETOOLONG:
                raise
            # a path given (or named by a file) longer than the file system allows: bad input wherever it is met
            raise ConfigError(
                f"'{err.filename}' is longer than its file system allows (a name of at most 255 bytes, a path of "
                "at most 4095, on most): give a shorter path"
            ) from err
    except Preempted as stop:
        from utils.distributed.process_group import cleanup  # a stopped training run: torch is loaded

        if group_rank() in (None, 0):  # one line for the job: every rank stops alike
            print(f"stopped: {stop}", file=sys.stderr, flush=True)
        cleanup()
        return PREEMPTED_EXIT
    except UserError as err:
        rank = group_rank()
        if args.debug and rank is None:
            raise
        print(f"{'' if rank is None else f'[rank{rank}] '}error: {one_line(err)}", file=sys.stderr, flush=True)
        if args.debug:
            traceback.print_exc()
        if rank is not None:
            from utils.distributed.process_group import exit_now

            exit_now(2, err)
        return 2
    except Exception as err:  # a bug, often in the user's own code: the traceback names its file and line
        rank = group_rank()
        if rank is None:
            raise
        from utils.distributed.process_group import PEER_GRACE_S, exit_now

        # One rank failed: report and leave now; waiting in teardown could hang the job.
        print(f"[rank{rank}] failed:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
        exit_now(1, err, wait_s=PEER_GRACE_S)  # it may be a consequence of a peer's failure: let that be named


def group_rank() -> Optional[int]:
    """This process's rank in a process group of several; None in one process (a command that never loaded torch
    has no process group)."""
    if "torch.distributed" not in sys.modules:
        return None
    from utils.distributed.ops import get_rank, is_dist

    return get_rank() if is_dist() else None


def in_a_job() -> bool:
    """Whether this process is one of several (torchrun, srun and hand-set launches write WORLD_SIZE)."""
    size = os.environ.get("WORLD_SIZE", "1")
    return size.isdigit() and int(size) > 1


def end(code: int) -> NoReturn:
    """Exit with ``code``. A process of a job, done and out of its process group, ends without the interpreter's
    teardown, in which torch's C++ threads now and then abort ("terminate called without an active exception",
    exit -6: about 1 in 5 resumed 3-rank FSDP runs on a busy CPU, and 1 in 10 two-rank bf16 runs) and the launcher
    reports a finished job as failed. Every script run under a launcher ends through here."""
    if in_a_job():
        from utils.distributed.process_group import exit_now

        exit_now(code)
    sys.exit(code)


if __name__ == "__main__":
    end(main())
