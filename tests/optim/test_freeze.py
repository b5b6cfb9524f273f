"""Freezing by name pattern and frozen BatchNorm: frozen tensors are bit-identical after training."""

import copy

import pytest
import torch
from torch import nn

from utils.amp import Amp
from utils.config.schema import AmpConfig, OptimConfig
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts
from utils.errors import ConfigError
from utils.optim.freeze import apply_freeze
from utils.optim.optimizers import build_optimizer
from utils.registry import NETWORKS


def network() -> nn.Module:
    torch.manual_seed(0)
    return NETWORKS.build("classifier", num_classes=4, backbone="small_cnn", backbone_args={"widths": [4, 8]})


def one_epoch(model: nn.Module, batches: int = 4) -> None:
    """An epoch of AdamW with weight decay: any tensor the optimizer sees would move."""
    optimizer = build_optimizer(model, OptimConfig(lr=0.05, weight_decay=0.1))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    g = torch.Generator().manual_seed(0)
    loader = [
        (torch.randn(8, 1, 8, 8, generator=g) * 3 + 1, torch.randint(0, 4, (8,), generator=g)) for _ in range(batches)
    ]
    amp = Amp(AmpConfig(), torch.device("cpu"))
    Trainer(Parts(model, nn.CrossEntropyLoss(), amp, optimizer, scheduler, train_loader=loader), LoopOptions()).fit()


def snapshot(model: nn.Module) -> dict:
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_frozen_parameters_are_bit_identical_after_an_epoch():
    model = network()
    apply_freeze(model, ["backbone.stages.0.*", "head.2.bias"], freeze_bn=False)
    before = snapshot(model)
    one_epoch(model)
    after = model.state_dict()
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen and all(n.startswith("backbone.stages.0.") for n in frozen if n != "head.2.bias")
    for name in frozen:
        assert torch.equal(after[name], before[name]), name
    for name, param in model.named_parameters():
        if param.requires_grad:
            assert not torch.equal(after[name], before[name]), name
    # without freeze_bn the frozen stage's BatchNorm still tracks statistics
    assert not torch.equal(after["backbone.stages.0.0.1.running_mean"], before["backbone.stages.0.0.1.running_mean"])


def test_freeze_bn_keeps_statistics_and_eval_mode_through_training():
    model = network()
    apply_freeze(model, ["backbone.*"], freeze_bn=True)
    before = snapshot(model)
    one_epoch(model)
    after = model.state_dict()
    for name, value in before.items():
        if name.startswith("backbone."):  # weights, running_mean/var, num_batches_tracked
            assert torch.equal(after[name], value), name
    model.train()
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert bns and not any(m.training for m in bns) and model.training
    assert not any(m.training for m in copy.deepcopy(model).train().modules() if isinstance(m, nn.BatchNorm2d))
    assert not torch.equal(after["head.2.weight"], before["head.2.weight"])  # the head trained


def test_frozen_tensors_are_left_out_of_the_optimizer(caplog):
    caplog.set_level("INFO")
    model = network()
    apply_freeze(model, ["backbone.*"], freeze_bn=False)
    optimizer = build_optimizer(model, OptimConfig())
    in_optimizer = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert in_optimizer == {id(p) for p in model.head.parameters()}
    head = sum(p.numel() for p in model.head.parameters())
    assert f"trainable parameters: {head} of {sum(p.numel() for p in model.parameters())}" in caplog.text
    assert "set model.freeze_bn=true" in caplog.text


def test_a_pattern_that_matches_nothing_is_an_error_naming_it():
    with pytest.raises(ConfigError, match="'backbone' matches no parameter.*'backbone.\\*'"):
        apply_freeze(network(), ["head.*", "backbone"], freeze_bn=False)


def test_freezing_everything_is_an_error_at_optimizer_build():
    model = network()
    apply_freeze(model, ["*"], freeze_bn=False)
    with pytest.raises(ConfigError, match="no trainable parameters"):
        build_optimizer(model, OptimConfig())
