"""What a run checks before its folder exists, and what ``open_run`` hands back.

Every rule the config alone decides (amp policy, compile and FSDP combinations, the monitor's direction) and
every registry name (a backbone named inside ``model.args`` too) is refused before any folder is made or
touched, and before any data is read: the start line (``run folder ...``) is never logged, a resumed run's
log.txt stays as it was, and ``latest`` does not move. A checkpoint a new run starts from is read as every
checkpoint is, its checksum first."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import List

import pytest

import main
from tests.conftest import fast_overrides
from utils.commands.command_line import parse_command_line
from utils.commands.start import open_run
from utils.commands.started import resolve_config
from utils.distributed.process_group import init_distributed
from utils.errors import CheckpointError

QUICK = ["train.iterations=2", "threads=1"]
# a user's network whose backbone argument is a backbone name, without backbone_args (the README's MyNet)
USER_NET = """
from torch import nn
from utils.registry import BACKBONES, NETWORKS


@NETWORKS.register()
class PlainBackboneNet(nn.Module):
    def __init__(self, num_classes: int, backbone: str = "small_cnn"):
        super().__init__()
        self.backbone = BACKBONES.build(backbone)
        self.head = nn.Linear(self.backbone.out_channels[-1], num_classes)

    def forward(self, x):
        return self.head(self.backbone(x)[-1].mean(dim=(2, 3)))
"""


def errors_of(capsys) -> List[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    assert "run folder" not in err, err[-3000:]  # stopped before the start line: no folder was opened
    return [line for line in err.splitlines() if line.startswith("error:")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """<root>/t with run_001: a 2-step digits run."""
    root = tmp_path_factory.mktemp("start")
    assert main.main([*fast_overrides(root, "t", epochs=1), *QUICK]) == 0
    return root


@pytest.fixture
def user_net(tmp_path, monkeypatch) -> str:
    (tmp_path / "plain_backbone_net.py").write_text(USER_NET)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "custom_imports=[plain_backbone_net]"


@pytest.mark.parametrize("network", ["classifier", "plain_backbone_net"])
def test_an_unknown_backbone_inside_model_args_is_refused_before_the_data_is_read(network, user_net, tmp_path, capsys):
    """A network without backbone_args (plain_backbone_net) got its backbone checked only when built, after the data."""
    missing = tmp_path / "no_such_data"  # reading the data first would fail on this folder instead
    args = [
        f"experiment.output_root={tmp_path / 'out'}",
        user_net,
        f"model.name={network}",
        "model.args.backbone=resnet19",
        "data.name=image_folder",
        f"data.root={missing}",
        *QUICK,
    ]
    assert main.main(args) == 2
    (line,) = errors_of(capsys)
    assert line.startswith("error: unknown backbone 'resnet19'; known:") and line.endswith("did you mean 'resnet18'?")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "rule, expected",
    [
        (
            ["amp.opt_level=O1", "amp.keep_batchnorm_fp32=true"],
            "error: amp.keep_batchnorm_fp32 applies to O2 and O3 only",
        ),
        (["amp.backend=apex"], "error: amp.backend=apex: 'apex.amp' is not importable"),
        (["dist.mode=fsdp", "train.ema={decay: 0.9}"], "error: train.ema with dist.mode=fsdp"),
    ],
)
def test_a_config_only_rule_leaves_a_resumed_run_untouched(trained, tmp_path, capsys, rule, expected):
    """These ran after the run folder was opened: the resumed run's log.txt got the start line and the error."""
    root = tmp_path / "copy"
    shutil.copytree(trained, root, symlinks=True)
    log_before = (root / "t" / "run_001" / "log.txt").read_bytes()
    assert main.main([*fast_overrides(root, "t", epochs=2), *QUICK, "--resume", *rule]) == 2
    (line,) = errors_of(capsys)
    assert line.startswith(expected), line
    assert (root / "t" / "run_001" / "log.txt").read_bytes() == log_before
    assert (
        sorted(p.name for p in (root / "t").iterdir()) == ["latest", "run_001"]
        and os.readlink(root / "t" / "latest") == "run_001"
    )


def test_open_run_hands_back_the_folder_the_checkpoint_and_its_record(trained, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(trained, root, symlinks=True)
    _, args = parse_command_line([*fast_overrides(root, "t", epochs=2), *QUICK], "")
    cfg, info = resolve_config(args, "train", None), init_distributed("cpu")
    opened = open_run(cfg, info, "train", str(root / "t" / "run_001"))  # finished: continued when named
    try:
        assert opened.folder.path == root / "t" / "run_001"
        chosen = opened.chosen
        assert chosen.path == root / "t" / "run_001" / "checkpoints" / "epoch0000_batch000002.pt"
        assert chosen.record.epoch == 0 and "top1" in chosen.record.metrics
        assert chosen.loaded.source == str(chosen.path)  # rank 0 read it once, while it chose it
    finally:
        opened.folder.release()
    fresh = open_run(cfg, info, "train", False)
    fresh.folder.release()
    assert (fresh.folder.path.name, fresh.chosen) == ("run_002", None)


def test_a_corrupt_checkpoint_starts_no_run(trained, tmp_path, capsys):
    """--resume FILE with a file outside every run adopts it into a new run: it was read without its checksum."""
    source = trained / "t" / "run_001" / "checkpoints" / "epoch0000_batch000002.pt"
    copy = tmp_path / "loose" / "epoch0000_batch000002.pt"
    copy.parent.mkdir()
    shutil.copy(source, copy)
    shutil.copy(source.with_name(source.name + ".sha256"), copy.with_name(copy.name + ".sha256"))
    data = bytearray(copy.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte: a file torch may still read
    copy.write_bytes(bytes(data))
    root = tmp_path / "out"
    with pytest.raises(CheckpointError, match="checksum mismatch"):
        main.main([*fast_overrides(root, "n", epochs=2), *QUICK, "--resume", str(copy), "--debug"])
    assert not (root / "n").exists()


@pytest.mark.slow  # a torchrun job of two processes
def test_rank_0_s_refusal_to_open_a_run_reaches_every_rank(tmp_path):
    """open_run decides on rank 0 alone; its error must end rank 1 too, at once, rather than leave it waiting."""
    from tests.fixtures.dist_utils import run, torchrun

    proc = run(torchrun(2, *fast_overrides(tmp_path, "none", epochs=1), *QUICK, "--resume"), timeout=180)
    assert proc.returncode != 0
    for rank in (0, 1):
        assert (
            f"[rank{rank}] error: --resume: no checkpoint in '{tmp_path / 'none'}'; train without --resume first"
            in proc.stderr
        ), proc.stderr[-3000:]
    assert not (tmp_path / "none").exists()
