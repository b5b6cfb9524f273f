"""Weight initialisation order, fine-tuning from another task's checkpoint, and the pretrain -> finetune configs."""

import logging

import pytest
import torch

import main
from tests.conftest import ROOT
from utils.amp import Amp
from utils.checkpoint.restore import load_initial_weights
from utils.checkpoint.resume_point import checkpoint_to_resume, run_to_continue
from utils.checkpoint.start_point import start_point
from utils.checkpoint.state import Progress, RunRecord, StateObjects, snapshot_training_state
from utils.config.schema import AmpConfig, ModelConfig
from utils.errors import CheckpointError
from utils.registry import NETWORKS

SMALL = {"widths": [4, 8]}


def classifier(num_classes: int, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return NETWORKS.build("classifier", num_classes=num_classes, backbone="small_cnn", backbone_args=SMALL)


def backbone_of(state):
    return {k: v for k, v in state.items() if k.startswith("backbone.")}


@pytest.mark.parametrize("layout", ["checkpoint", "ddp_state_dict"])
def test_other_num_classes_loads_the_backbone_and_reinitialises_the_head(tmp_path, caplog, layout):
    source = classifier(3, seed=1)
    with torch.no_grad():  # running statistics that differ from a fresh network's
        for name, buf in source.named_buffers():
            if name.endswith("running_mean"):
                buf.uniform_(-1, 1)
    state = source.state_dict()
    obj = {"model": state, "epoch": 4} if layout == "checkpoint" else {f"module.{k}": v for k, v in state.items()}
    path = tmp_path / "source.pt"
    torch.save(obj, path)

    target = classifier(5, seed=2)
    fresh_head = {k: v.clone() for k, v in target.state_dict().items() if k.startswith("head.")}
    caplog.set_level(logging.INFO)
    assert load_initial_weights(target, ModelConfig(pretrained=str(path)), None) is None

    loaded = target.state_dict()
    for key, value in backbone_of(state).items():
        assert torch.equal(loaded[key], value), key
    for key, value in fresh_head.items():  # the head is the network's own new one
        assert torch.equal(loaded[key], value), key
    assert loaded["head.2.weight"].shape == (5, 8)
    assert "head.2.weight: (3, 8) -> (5, 8)" in caplog.text and "head.2.bias: (3,) -> (5,)" in caplog.text
    assert "weights: model.pretrained=" in caplog.text


def test_a_bare_backbone_state_dict_loads_with_a_prefix(tmp_path):
    source = classifier(3, seed=1)
    path = tmp_path / "backbone.pt"
    torch.save(source.backbone.state_dict(), path)
    target = classifier(3, seed=2)
    load_initial_weights(target, ModelConfig(pretrained=str(path), pretrained_prefix="backbone."), None)
    for key, value in backbone_of(source.state_dict()).items():
        assert torch.equal(target.state_dict()[key], value)


def test_strict_pretrained_makes_a_new_head_an_error(tmp_path):
    path = tmp_path / "source.pt"
    torch.save({"model": classifier(3, seed=1).state_dict()}, path)
    with pytest.raises(CheckpointError) as err:
        load_initial_weights(classifier(5, seed=2), ModelConfig(pretrained=str(path), pretrained_strict=True), None)
    message = str(err.value)
    assert "head.2.weight" in message and "pretrained_strict=false" in message and "\n" not in message


def training_checkpoint(model: torch.nn.Module, epoch: int) -> dict:
    """What the checkpointer writes for ``model`` at the start of ``epoch``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    objects = StateObjects(model, optimizer, scheduler, Amp(AmpConfig(), torch.device("cpu")))
    return snapshot_training_state(objects, Progress(epoch=epoch), RunRecord())


def test_resume_checkpoint_wins_over_pretrained_which_wins_over_init(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    resumed, pretrained = classifier(3, seed=1), classifier(3, seed=2)
    ckpt_dir = tmp_path / "checkpoints"
    ckpt_dir.mkdir()
    torch.save(training_checkpoint(resumed, epoch=2), ckpt_dir / "last.pt")
    torch.save(pretrained.state_dict(), tmp_path / "pre.pt")
    cfg = ModelConfig(pretrained=str(tmp_path / "pre.pt"))

    assert run_to_continue(tmp_path, resume=False, auto_resume=False) == (None, None, "")
    with pytest.raises(CheckpointError, match="--resume"):
        run_to_continue(tmp_path / "none", resume=True, auto_resume=False)
    # a folder of an earlier version: <experiment>/checkpoints
    run = run_to_continue(tmp_path, resume=False, auto_resume=True).run
    chosen = checkpoint_to_resume(run, None, required=False)
    assert chosen.path == ckpt_dir / "last.pt"

    model = classifier(3, seed=3)
    resume = start_point(chosen, guard=lambda checkpoint: True)
    load_initial_weights(model, cfg, resume)
    assert resume.checkpoint.progress.epoch == 2 and resume.record is None and "resumed from" in caplog.text
    assert all(torch.equal(v, resumed.state_dict()[k]) for k, v in model.state_dict().items())

    model = classifier(3, seed=3)
    load_initial_weights(model, cfg, None)
    assert all(torch.equal(v, pretrained.state_dict()[k]) for k, v in model.state_dict().items())

    model, own = classifier(3, seed=3), classifier(3, seed=3)
    load_initial_weights(model, ModelConfig(), None)
    assert all(torch.equal(v, own.state_dict()[k]) for k, v in model.state_dict().items())
    assert "the network's own initialisation" in caplog.text


def test_pretrain_then_finetune_configs_run_and_keep_the_frozen_backbone(out_root, caplog, capsys):
    caplog.set_level(logging.INFO)
    common = [f"experiment.output_root={out_root}", "model.args.backbone_args={widths: [8, 16]}"]
    assert main.main(["--config", str(ROOT / "configs" / "digits_pretrain.yaml"), *common, "train.epochs=3"]) == 0
    best = out_root / "digits_pretrain" / "latest" / "checkpoints" / "best.pt"
    source = torch.load(best, weights_only=False)
    assert source["ema"] is not None and source["config"]["eval"]["use_ema"]
    source_ema = source["ema"]["weights"]

    finetune = [
        "--config",
        str(ROOT / "configs" / "digits_finetune.yaml"),
        *common,
        "train.epochs=2",
        f"model.pretrained={best}",
    ]
    assert main.main(finetune) == 0
    assert "top1=" in capsys.readouterr().out
    tuned = torch.load(out_root / "digits_finetune" / "latest" / "checkpoints" / "last.pt", weights_only=False)["model"]
    # a run that selected best.pt with EMA weights hands on its EMA weights
    for key, value in backbone_of(source_ema).items():  # weights and BN statistics, bit for bit
        assert torch.equal(tuned[key], value), key
    assert tuned["head.2.weight"].shape == (4, 16) and source_ema["head.2.weight"].shape == (6, 16)
    assert "head.2.weight: (6, 16) -> (4, 16)" in caplog.text
    assert "trainable parameters: 68 of" in caplog.text  # the 4x16 + 4 head alone
