"""Per-group learning rates: pattern groups, layer-wise decay, and their survival through the scheduler."""

import pytest
import torch
from torch import nn

from utils.config.schema import OptimConfig, ScheduleConfig
from utils.errors import ConfigError
from utils.optim.optimizers import build_optimizer
from utils.optim.schedules import build_scheduler, lr_factor_fn
from utils.registry import BACKBONES, NETWORKS


def lrs_by_name(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: (g["lr"], g["weight_decay"]) for g in optimizer.param_groups for p in g["params"]}


def small_classifier() -> nn.Module:
    return NETWORKS.build("classifier", num_classes=4, backbone="small_cnn", backbone_args={"widths": [4, 8, 16]})


def test_layer_decay_on_the_small_backbone_gives_the_documented_rates():
    model = small_classifier()
    optimizer = build_optimizer(model, OptimConfig(lr=0.1, layer_decay=0.75))
    lrs = lrs_by_name(model, optimizer)
    # ids: stage i -> i, head -> num_layers = 3; lr_i = 0.1 * 0.75 ** (3 - i)
    expected = {
        "backbone.stages.0.": 0.0421875,
        "backbone.stages.1.": 0.05625,
        "backbone.stages.2.": 0.075,
        "head.": 0.1,
    }
    for name, (lr, _) in lrs.items():
        (want,) = [v for prefix, v in expected.items() if name.startswith(prefix)]
        assert lr == pytest.approx(want, rel=1e-12), name
    assert len(lrs) == len(list(model.parameters()))


def test_layer_decay_on_resnet18_counts_the_stem_and_each_residual_block():
    model = NETWORKS.build("classifier", num_classes=4, backbone="resnet18", backbone_args={"in_channels": 1})
    assert model.num_layers == 9  # stem + 8 blocks; the head is layer 9
    lrs = lrs_by_name(model, build_optimizer(model, OptimConfig(lr=1.0, layer_decay=0.5, weight_decay=0.01)))
    hand = {
        "backbone.stages.0.0.weight": 0.5**9,  # conv1
        "backbone.stages.0.1.weight": 0.5**9,  # bn1
        "backbone.stages.1.1.0.conv1.weight": 0.5**8,  # layer1.0
        "backbone.stages.1.1.1.bn2.bias": 0.5**7,  # layer1.1
        "backbone.stages.2.0.downsample.0.weight": 0.5**6,  # layer2.0
        "backbone.stages.3.1.conv2.weight": 0.5**3,  # layer3.1
        "backbone.stages.4.0.conv1.weight": 0.5**2,  # layer4.0
        "backbone.stages.4.1.conv2.weight": 0.5**1,  # layer4.1
        "head.2.weight": 1.0,
    }
    for name, lr in hand.items():
        assert lrs[name][0] == pytest.approx(lr, rel=1e-12), name
    assert lrs["backbone.stages.4.1.conv2.weight"][1] == 0.01 and lrs["backbone.stages.1.1.1.bn2.bias"][1] == 0.0


def test_pattern_groups_first_match_wins_and_keep_the_no_decay_split():
    model = small_classifier()
    cfg = OptimConfig(
        lr=0.1,
        weight_decay=1e-4,
        param_groups=[
            {"pattern": "backbone.stages.0.*", "lr_mult": 0.5},
            {"pattern": ["backbone.*"], "lr_mult": 0.1, "weight_decay": 0.05},
        ],
    )
    lrs = lrs_by_name(model, build_optimizer(model, cfg))
    assert lrs["backbone.stages.0.0.0.weight"] == pytest.approx((0.05, 1e-4))
    assert lrs["backbone.stages.1.0.0.weight"] == pytest.approx((0.01, 0.05))
    assert lrs["backbone.stages.1.0.1.weight"] == pytest.approx((0.01, 0.0))  # BatchNorm: no decay
    assert lrs["head.2.weight"] == pytest.approx((0.1, 1e-4)) and lrs["head.2.bias"] == pytest.approx((0.1, 0.0))


def test_groups_and_layer_decay_multiply():
    model = small_classifier()
    cfg = OptimConfig(lr=0.1, layer_decay=0.5, param_groups=[{"pattern": "backbone.*", "lr_mult": 0.1}])
    lrs = lrs_by_name(model, build_optimizer(model, cfg))
    assert lrs["backbone.stages.1.0.0.weight"][0] == pytest.approx(0.1 * 0.1 * 0.5**2)
    assert lrs["head.2.weight"][0] == pytest.approx(0.1)


def test_the_scheduler_scales_every_group_by_the_same_factor():
    model = small_classifier()
    optimizer = build_optimizer(model, OptimConfig(lr=0.1, layer_decay=0.75))
    base = [g["lr"] for g in optimizer.param_groups]
    assert len(set(base)) == 4
    schedule = ScheduleConfig(name="cosine", warmup_epochs=1, warmup_start_factor=0.1)
    scheduler = build_scheduler(optimizer, schedule, iters_per_epoch=5, total_iters=20)
    factor = lr_factor_fn(schedule, 5, 20)
    for it in range(1, 18):
        optimizer.step()
        scheduler.step()
        for group, lr0 in zip(optimizer.param_groups, base):
            assert group["lr"] == pytest.approx(lr0 * factor(it), rel=1e-9)
    assert factor(3) < 1.0 and factor(12) < 1.0  # both warm-up and decay were exercised


def test_bad_group_specs_are_errors_naming_them():
    model = small_classifier()
    with pytest.raises(ConfigError, match=r"optim.param_groups\[0\] pattern 'backbon.\*' matches no parameter"):
        build_optimizer(model, OptimConfig(param_groups=[{"pattern": "backbon.*", "lr_mult": 0.1}]))
    with pytest.raises(ConfigError, match="unknown \\['lr_mul'\\]"):
        build_optimizer(model, OptimConfig(param_groups=[{"pattern": "backbone.*", "lr_mul": 0.1}]))


class BackboneAndHead(nn.Module):
    """A network with no layer ids of its own, following the backbone/head convention."""

    def __init__(self):
        super().__init__()
        self.backbone = BACKBONES.build("small_cnn", widths=(4, 8))
        self.head = nn.Linear(8, 2)


def test_layer_decay_falls_back_to_the_backbone_and_fails_clearly_without_one():
    model = BackboneAndHead()
    lrs = lrs_by_name(model, build_optimizer(model, OptimConfig(lr=1.0, layer_decay=0.5)))
    assert lrs["backbone.stages.0.0.0.weight"][0] == 0.25 and lrs["head.weight"][0] == 1.0
    with pytest.raises(ConfigError, match="layer_id"):
        build_optimizer(nn.Linear(2, 2), OptimConfig(layer_decay=0.5))
