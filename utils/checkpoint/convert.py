"""Turn a sharded checkpoint (``dist.mode=fsdp``) into one ordinary checkpoint file, or into a ``.safetensors`` weights file.

    python -m utils.checkpoint.convert output/<experiment>/run_001/checkpoints/best.dcp best.pt
    python -m utils.checkpoint.convert output/<experiment>/run_001/checkpoints/best.dcp best.safetensors

A ``.pt`` file holds the whole weights and the optimizer state in ``torch.optim``'s own form, with
its ``.sha256``: ``--mode test --checkpoint``, ``model.pretrained`` and a ``dist.mode=ddp`` resume
read it. A ``.safetensors`` file holds the weights the run evaluated with (the EMA's when it selected
with them) and nothing else: ``model.pretrained`` and a backbone's ``pretrained`` read it.
The source must be a sharded checkpoint directory (checked before anything is read); it is read
without running code, unless ``--trust-file`` names it. The target is a new file in an existing folder
outside every run folder and outside the source (``check_target``): nothing is ever overwritten (another
run's ``best.pt``, a file of the source). Runs in one process, without a process group. Exit 2 with one
``error:`` line for bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import List, Optional

from utils import __version__
from utils.checkpoint.files import sidecar, write_checkpoint
from utils.checkpoint.readers import missing
from utils.checkpoint.safe_load import trust_files
from utils.checkpoint.safetensors_io import is_safetensors, write_safetensors
from utils.checkpoint.sharded_layout import looks_sharded
from utils.checkpoint.state import Checkpoint
from utils.errors import CheckpointError, UserError, one_line
from utils.run.folder import run_holding


def check_source(source: Path) -> None:
    """CheckpointError unless ``source`` is a sharded checkpoint directory (complete or not: ``Checkpoint.load`` names
    what a half-written one lacks); nothing of it is read here."""
    if looks_sharded(source):
        return
    if source.is_file():
        raise CheckpointError(f"'{source}' is not a sharded checkpoint directory (no .metadata); it is a file already")
    if not source.exists():
        raise missing(source)
    raise CheckpointError(
        f"'{source}' is not a sharded checkpoint directory (no .metadata, state.pt or shards); give a <run>/checkpoints/*.dcp directory"
    )


def check_target(target: Path, source: Path) -> None:
    """CheckpointError unless ``target`` is a new file (its ``.sha256`` too) in an existing folder, outside every run
    folder (``run_holding``: a run's files are its own) and outside ``source``; nothing is written here."""
    resolved = target.expanduser().resolve()
    existing = next((path for path in (target, sidecar(target)) if os.path.lexists(path)), None)
    if existing is not None:
        raise CheckpointError(
            f"target '{existing}' exists; convert never overwrites a file: give a new file name (or move the old file away)"
        )
    if resolved.is_relative_to(source.expanduser().resolve()):
        raise CheckpointError(
            f"target '{target}' lies inside the source '{source}', whose files its checksums cover; give a file outside it"
        )
    run = run_holding(target)
    if run is not None:
        raise CheckpointError(
            f"target '{target}' lies inside the run folder '{run}', whose files are the run's own; give a file outside every run folder"
        )
    if not resolved.parent.is_dir():
        raise CheckpointError(
            f"the folder of target '{target}' does not exist; create it first (mkdir -p {target.parent}) or give a file in an existing folder"
        )


def convert(source: Path, target: Path) -> str:
    """Write the sharded checkpoint ``source`` as the file ``target`` (a checkpoint, or its evaluation weights when
    ``target`` ends in ``.safetensors``); returns its SHA-256."""
    check_source(source)
    check_target(target, source)
    checkpoint = Checkpoint.load(source)
    if is_safetensors(target):
        return write_safetensors(checkpoint.eval_weights, target, {"framework": __version__, "source": str(source)})
    return write_checkpoint(checkpoint.to_single_file(), target)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "source", type=Path, help="a sharded checkpoint directory (epochE_batchB.dcp, last.dcp, best.dcp)"
    )
    parser.add_argument(
        "target", type=Path, help="the file to write: a checkpoint (e.g. best.pt) or weights (best.safetensors)"
    )
    parser.add_argument(
        "--trust-file",
        action="append",
        default=[],
        metavar="PATH",
        help="read this file or sharded checkpoint directory with full unpickling, which runs any code it holds (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        trust_files(args.trust_file)
        digest = convert(args.source, args.target)
    except UserError as err:
        print(f"error: {one_line(err)}", file=sys.stderr, flush=True)
        return 2
    print(f"wrote {args.target} (sha256 {digest[:12]}...)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
