"""The command line of ``main.py``: the mode's command the arguments name, that command's own parser, and the
refusal of an option another mode takes (which modes take it, and what to do instead).

Each mode's module (``utils/commands/<name>.py``) declares a ``COMMAND``; only the chosen one is imported, so a
mode loads what it runs and nothing else. An option of another mode is named as such by that mode's parser::

    main.py: error: --checkpoint does nothing in --mode train: it is for --mode test/predict/export; ...
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, List, Mapping, Optional, Sequence, Set, Tuple

from utils.commands.options import MODES, ModeParser, mode_parser

COMMANDS = ("train", "test", "predict", "export", "pack", "compare", "sweep")  # the modules, in the order named


def _nothing(parser: ModeParser, args: argparse.Namespace) -> None:
    """No check between options."""


@dataclass(frozen=True)
class Command:
    """One mode: how messages name it, the ``--mode`` it runs under, its options and the checks between them,
    and its run (the process's exit code)."""

    name: str  # as messages name it: "--mode test", "--sweep"
    mode: str  # the --mode it runs under
    description: str
    add_options: Callable[[ModeParser], None]
    run: Callable[[argparse.Namespace], int]
    check: Callable[[ModeParser, argparse.Namespace], None] = _nothing
    # an option of another mode given to this one -> what to do instead, where the option would mislead
    instead: Mapping[str, str] = field(default_factory=dict)
    arguments: Callable[[List[str]], List[str]] = list  # the arguments as its parser reads them


def command_of(name: str) -> Command:
    return importlib.import_module(f"utils.commands.{name}").COMMAND


def chosen(argv: List[str]) -> str:
    """The command the arguments name: ``--mode``'s (train by default), or the sweep's for ``--sweep`` in train
    mode. Arguments that say no mode choose train's command, whose parser names what is wrong with them."""
    peek = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    peek.add_argument("--mode", default="train")
    peek.add_argument("--sweep")
    try:
        known, _ = peek.parse_known_args(argv)
    except argparse.ArgumentError:
        return "train"
    if known.mode == "train" and known.sweep is not None:
        return "sweep"
    return known.mode if known.mode in MODES else "train"


def parser_of(command: Command, program: str = "") -> ModeParser:
    parser = mode_parser(f"{program.strip()}\n\n{command.name}: {command.description}".strip())
    command.add_options(parser)
    return parser


def parse_command_line(argv: Optional[List[str]], program: str) -> Tuple[Command, argparse.Namespace]:
    """The command ``argv`` names and its arguments, checked: an option it does not take exits 2 with one line
    (``refusal``), as do the checks between its options."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = command_of(chosen(argv))
    parser = parser_of(command, program)
    args, unknown = parser.parse_known_intermixed_args(command.arguments(argv))
    if unknown:
        parser.error(refusal(command, unknown[0], argv))
    command.check(parser, args)
    if args.local_rank is not None:
        os.environ.setdefault("LOCAL_RANK", str(args.local_rank))
    return command, args


def refusal(command: Command, given: str, argv: Sequence[str] = ()) -> str:
    """What to say about ``given``, an option ``command`` does not take: the modes that take it (an option no mode
    takes is unrecognized, as argparse says it, with the config key it names: ``config_hint``), and the command's
    advice for it."""
    flag = given.split("=", 1)[0]
    takers = {name: parser_of(command_of(name)).flags for name in COMMANDS}
    known: Set[str] = set().union(*takers.values())
    matches = {flag} & known or {option for option in known if option.startswith(flag)}  # argparse's abbreviations
    if len(matches) != 1 or not flag.startswith("--"):
        return f"unrecognized arguments: {given}{config_hint(given, argv)}"
    (option,) = matches
    modes = "/".join(dict.fromkeys(command_of(name).mode for name, flags in takers.items() if option in flags))
    return f"{option} does nothing in {command.name}: it is for --mode {modes}{command.instead.get(option, '')}"


def config_keys() -> List[str]:
    """Every leaf key of the config, dotted (``train.epochs``, ``optim.lr``): ``key_paths`` less its sections."""
    from utils.config.key_hints import key_paths
    from utils.config.schema import Config

    paths = list(key_paths(Config()))
    return [path for path in paths if not any(other.startswith(path + ".") for other in paths)]


def config_hint(given: str, argv: Sequence[str]) -> str:
    """``; config keys are set as key=value: train.epochs=5`` for ``--epochs 5`` (or ``--epochs=5``): an option no
    mode takes whose name is a config key's (its last part, or the whole dotted key), with the value that followed
    it; empty when none is."""
    flag, equals, value = given.partition("=")
    name = flag.lstrip("-").replace("-", "_")
    if not flag.startswith("--") or not name:
        return ""
    keys = [key for key in config_keys() if key == name or key.rsplit(".", 1)[-1] == name]
    if not keys:
        return ""
    if not equals:  # the next argument, when it is a value and not an option or an override
        at = list(argv).index(given) if given in argv else -1
        following = argv[at + 1] if 0 <= at < len(argv) - 1 else ""
        value = following if following and not following.startswith("-") and "=" not in following else "VALUE"
    shown = ", ".join(f"{key}={value}" for key in keys[:4]) + (", ..." if len(keys) > 4 else "")
    return f"; config keys are set as key=value, not as options: {shown}"
