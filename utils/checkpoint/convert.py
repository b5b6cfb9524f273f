"""Turn a sharded checkpoint (``dist.mode=fsdp``) into one ordinary checkpoint file.

    python -m utils.checkpoint.convert output/<experiment>/run_001/checkpoints/best.dcp best.pt

The file holds the whole weights and the optimizer state in ``torch.optim``'s own form, with its
``.sha256``: ``--mode test --checkpoint``, ``model.pretrained`` and a ``dist.mode=ddp`` resume read it.
Runs in one process, without a process group. Exit 2 with one ``error:`` line for bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional

from utils.checkpoint.files import write_checkpoint
from utils.checkpoint.state import Checkpoint
from utils.errors import CheckpointError, UserError, one_line


def convert(source: Path, target: Path) -> str:
    """Write the sharded checkpoint ``source`` as the file ``target``; returns its SHA-256."""
    checkpoint = Checkpoint.load(source)
    if checkpoint.shards is None:
        raise CheckpointError(f"'{source}' is not a sharded checkpoint directory (no .metadata); it is a file already")
    return write_checkpoint(checkpoint.to_single_file(), target)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="a sharded checkpoint directory (epochE_batchB.dcp, last.dcp, best.dcp)")
    parser.add_argument("target", type=Path, help="the file to write (e.g. best.pt)")
    args = parser.parse_args(argv)
    try:
        digest = convert(args.source, args.target)
    except UserError as err:
        print(f"error: {one_line(err)}", file=sys.stderr, flush=True)
        return 2
    print(f"wrote {args.target} (sha256 {digest[:12]}...)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
