"""The options every mode shares (``--mode``, ``--debug``, ``--local-rank``; ``--config`` with the overrides and
``--trust-file`` for the modes that read them) and the parser a mode declares its own options in."""

from __future__ import annotations

import argparse
import re
from typing import Any, NoReturn, Set

MODES = ("train", "test", "predict", "export", "pack", "compare")
MODE_HELP = (
    "train (default): train the config's network; test: evaluate --checkpoint on data.test_split; "
    "predict: run --checkpoint on the --input images; export: write --checkpoint's network as --format; "
    "compare: the runs of the PATHs by configuration (mean, std, 95%% interval, p-value over seeds); "
    "pack: write the config's dataset as shards into --output (a folder or s3://bucket/prefix); "
    "--sweep SWEEP.yaml trains a sweep's trials as runs of this mode; --mode MODE --help lists the options of MODE"
)


class ModeParser(argparse.ArgumentParser):
    """The parser of one mode; it records the option strings it takes (``flags``), which the refusal of an
    option another mode takes looks up (``utils/commands/command_line.py``)."""

    def __init__(self, **kwargs: Any) -> None:
        self.flags: Set[str] = set()  # before argparse adds --help
        super().__init__(**kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.flags.update(action.option_strings)
        return action

    def error(self, message: str) -> NoReturn:
        """One line, ``main.py: error: ...``, exit 2: argparse's usage block above it (6-9 lines of every option)
        buried the line that says what is wrong; ``--help`` still prints it."""
        if message.startswith("argument --mode: invalid choice") and EVALUATE.search(message):
            message += "; to evaluate a checkpoint: --mode test --checkpoint PATH"
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help lists the options)\n")


# a --mode a user may type for --mode test
EVALUATE = re.compile(r"invalid choice: '(eval|evaluate|evaluation|val|validate|validation|valid)'")


def mode_parser(description: str) -> ModeParser:
    """A mode's parser with the options every mode takes: ``--mode`` (which chose it), ``--debug`` and the rank
    that ``torch.distributed.launch`` passes (``--local-rank=N``, older PyTorch ``--local_rank N``)."""
    parser = ModeParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=MODES, default="train", help=MODE_HELP)
    parser.add_argument("--debug", action="store_true", help="show tracebacks for input errors")
    # torch.distributed.launch passes --local-rank=N (older PyTorch: --local_rank N); torchrun sets LOCAL_RANK.
    parser.add_argument("--local-rank", "--local_rank", dest="local_rank", type=int, default=None)
    return parser


def add_config(parser: ModeParser) -> None:
    """``--config FILE`` and the ``key.sub=value`` overrides on top of it."""
    parser.add_argument("--config", help="experiment YAML file (defaults: utils/config/schema.py)")
    parser.add_argument("overrides", nargs="*", metavar="key.sub=value", help="config overrides")


def add_trust_file(parser: ModeParser) -> None:
    """``--trust-file PATH``: the modes that load weights or checkpoints."""
    parser.add_argument(
        "--trust-file",
        action="append",
        default=[],
        metavar="PATH",
        help="load this checkpoint or weights file (or .dcp directory) with full unpickling, which runs any code it holds; only for files you trust (repeatable)",
    )


def add_print_config(parser: ModeParser) -> None:
    """``--print-config``: the modes that resolve a config and start a run (``started.print_config``)."""
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config as YAML (what the run's config.yaml would hold) and exit: no run folder, no data read",
    )


def add_checkpoint(parser: ModeParser, mode: str) -> None:
    """``--checkpoint PATH``: the checkpoint test, predict and export read (``needs_checkpoint`` checks it is given)."""
    parser.add_argument("--checkpoint", help=f"the checkpoint {mode} reads (its saved config is the base)")


def needs_checkpoint(parser: ModeParser, args: argparse.Namespace) -> None:
    if not args.checkpoint:
        parser.error(f"--mode {args.mode} needs --checkpoint PATH")
