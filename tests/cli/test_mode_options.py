"""Options that the chosen ``--mode`` does not read are refused by that mode's own parser (exit code 2, one error
line naming the modes that read them), and ``--help`` lists the modes. (Nothing is loaded before these checks.)"""

from __future__ import annotations

import re

import pytest

import main
from utils.commands.command_line import parse_command_line

# option -> a mode that does not read it (each refused with one error line, exit code 2)
OTHER_MODE_OPTIONS = {
    "--checkpoint in train mode": (
        ["--checkpoint", "x.pt"],
        r"--checkpoint does nothing in --mode train: it is for --mode test/predict/export; training never starts from it: "
        r"to start from its weights use model.pretrained=FILE, to continue its run use --resume FILE",
    ),
    "--output in train mode": (
        ["--output", "out"],
        r"--output does nothing in --mode train: it is for --mode predict/export",
    ),
    "--output in test mode": (
        ["--mode", "test", "--checkpoint", "x.pt", "--output", "out"],
        r"--output does nothing in --mode test",
    ),
    "--input in test mode": (
        ["--mode", "test", "--checkpoint", "x.pt", "--input", "imgs"],
        r"--input does nothing in --mode test: it is for --mode predict",
    ),
    "--input in export mode": (
        ["--mode", "export", "--checkpoint", "x.pt", "--input", "imgs"],
        r"--input does nothing in --mode export",
    ),
    "--resume in test mode": (
        ["--mode", "test", "--checkpoint", "x.pt", "--resume"],
        r"--resume does nothing in --mode test: it is for --mode train",
    ),
    "--resume-force in predict mode": (
        ["--mode", "predict", "--checkpoint", "x.pt", "--resume-force"],
        r"--resume-force does nothing in --mode predict",
    ),
    "--format in predict mode": (
        ["--mode", "predict", "--checkpoint", "x.pt", "--format", "pt2"],
        r"--format does nothing in --mode predict: it is for --mode export",
    ),
}


@pytest.mark.parametrize("case", sorted(OTHER_MODE_OPTIONS))
def test_an_option_the_mode_does_not_read_is_refused(case, capsys):
    args, expected = OTHER_MODE_OPTIONS[case]
    with pytest.raises(SystemExit) as stop:
        main.main(args)
    assert stop.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and re.search(expected, errors[0]), errors


def test_help_lists_the_four_modes(capsys):
    with pytest.raises(SystemExit) as stop:
        main.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert stop.value.code == 0 and out.count("Train, test, predict with or export") == 1
    assert (
        "train (default): train the config's network; test: evaluate --checkpoint on data.test_split; predict: run --checkpoint on the --input images; export:"
        in out
    )


@pytest.mark.parametrize(
    "argv, resume, overrides",
    [
        (["--resume"], True, []),
        (["--resume", "train.epochs=3", "seed=1"], True, ["train.epochs=3", "seed=1"]),  # an override: no run
        (["seed=1", "--resume", "optim.lr=0.1", "optim.lr=0.2"], True, ["seed=1", "optim.lr=0.1", "optim.lr=0.2"]),
        (["--resume", "out/run_001_t000_lr=0.01_seed=1", "seed=1"], "out/run_001_t000_lr=0.01_seed=1", ["seed=1"]),
        (["--resume", "run_001_t000_lr=0.01", "seed=1"], "run_001_t000_lr=0.01", ["seed=1"]),  # no config key
        (["--resume=", "seed=1"], True, ["seed=1"]),
        (["--reset-optimizer"], True, []),
    ],
)
def test_resume_names_a_run_only_right_after_it_and_overrides_keep_their_order(argv, resume, overrides):
    """A ``key=value`` whose key is a config key is an override wherever it stands; anything else right after
    ``--resume`` is the run or checkpoint it continues, a sweep's ``run_..._lr=0.01_seed=1`` folders too."""
    command, args = parse_command_line(argv, "")
    assert (command.mode, args.resume, args.overrides) == ("train", resume, overrides)
