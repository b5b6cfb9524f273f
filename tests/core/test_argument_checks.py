"""Values that passed the checks and then broke or misled, the arguments of what a config names: hook arguments
and tasks, timm's own arguments, loss weights, param groups that claim nothing, extra metrics' names.

(Transforms, model.input_size, batch and test sizes against the data: tests/core/test_shape_checks.py; the
one-line errors as main.py prints them: tests/cli/test_more_bad_input.py.)
"""

from __future__ import annotations

import pytest

from tests.fixtures.config_checks import refused
from utils.config.load import load_config
from utils.config.schema import OptimConfig
from utils.errors import ConfigError
from utils.hook.selection import task_hooks
from utils.metrics.extra import check_extras
from utils.optim.optimizers import build_optimizer
from utils.references import check_references
from utils.registry import BACKBONES, NETWORKS


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "hooks=[{name: confident_mistakes, per_row: 0}]",
            r"'hooks\[0\].per_row' must be an integer >= 1 \(an argument of hook 'confident_mistakes'\), got 0",
        ),
        ("hooks=[{name: confident_mistakes, images: -1}]", r"'hooks\[0\].images' must be an integer >= 1"),
        (
            "hooks=[{name: confusion_matrix}, {name: confident_mistakes, size: 0}]",
            r"'hooks\[1\].size' must be an integer >= 1",
        ),
        (
            "hooks=[{name: confusion_matrix, splits: [bogus]}]",
            r"'hooks\[0\].splits' must be a list of values from \['val', 'test'\] with at least one entry .*got \['bogus'\]",
        ),
        (
            "hooks=[{name: confusion_matrix, splits: []}]",
            r"'hooks\[0\].splits' must be a list of values from \['val', 'test'\] with at least one entry",
        ),
        (
            "hooks=[{name: saliency_grid}]",
            r"^config key 'hooks\[0\]' turns on hook 'saliency_grid', which serves eval.metric sod, but this run's eval.metric is classification; remove the entry",
        ),
        (
            "hooks=[{name: ClipStrips, clips: 2}]",
            r"turns on hook 'clip_strips', which serves eval.metric video, but this run's eval.metric is classification",
        ),
    ],
)
def test_hook_arguments_have_ranges_and_choices_and_a_hook_serves_the_runs_task(override, message):
    refused(override, message)


def test_a_hook_of_another_task_may_be_switched_off_and_one_without_tasks_runs_anywhere():
    check_references(
        load_config(
            overrides=["hooks=[{name: saliency_grid, enabled: false}, {name: confident_mistakes, splits: [val, test]}]"]
        )
    )
    assert "SaliencyGrid" not in [
        type(hook).__name__ for hook in task_hooks("classification", [{"name": "saliency_grid", "enabled": False}])
    ]
    with pytest.raises(ConfigError, match=r"turns on hook 'saliency_grid'"):
        task_hooks("classification", [{"name": "saliency_grid"}])


TIMM = "model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: resnet18, in_chans: 1%s}}"


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            ", out_indices: []",
            r"'model.args.backbone_args.out_indices' must be a list of integers with at least one entry or null \(an argument of backbone 'timm'\), got \[\]",
        ),
        (
            ", features_only: false",
            r"^backbone timm: features_only is set by the backbone itself .*; remove it from model.args.backbone_args$",
        ),
        (
            ", drop_rate: .nan",
            r"'model.args.backbone_args.drop_rate' must be a number in \[0, 1\) \(an argument of backbone 'timm'\), got nan",
        ),
        (", drop_rate: 5", r"'model.args.backbone_args.drop_rate' must be a number in \[0, 1\) .*got 5 \(int\)"),
        (", drop_path_rate: -0.1", r"'model.args.backbone_args.drop_path_rate' must be a number in \[0, 1\)"),
        (
            ", in_channels: 3",
            r"^backbone timm: in_chans=1 and in_channels=3 disagree \(both give the input's channel count; one would be ignored\); give the count once",
        ),
    ],
)
def test_timm_arguments_the_backbone_sets_ranges_and_channel_conflicts(extra, message):
    pytest.importorskip("timm")
    refused(TIMM % extra, message)


def test_timm_channel_conflicts_are_refused_when_built_too():
    pytest.importorskip("timm")
    # agreeing counts, a rate in range
    check_references(load_config(overrides=[TIMM % ", in_channels: 1, drop_path_rate: 0.1"]))
    with pytest.raises(ConfigError, match=r"in_chans=1 and in_channels=3 disagree"):  # the network passes in_channels=3
        NETWORKS.build("fpn_sod", backbone="timm", backbone_args={"model_name": "resnet18", "in_chans": 1})
    with pytest.raises(ConfigError, match=r"features_only is set by the backbone itself"):
        BACKBONES.build("timm", model_name="resnet18", features_only=False)


@pytest.mark.parametrize("weight", [".nan", ".inf"])
def test_loss_weights_must_be_finite(weight):
    with pytest.raises(
        ConfigError, match=r"^config key 'loss\[0\].weight' must be a finite number >= 0, got (nan|inf)$"
    ):
        load_config(overrides=[f"loss=[{{name: cross_entropy, weight: {weight}}}]"])


def test_each_param_group_must_claim_a_parameter_no_earlier_group_took():
    model = NETWORKS.build("classifier", num_classes=4, backbone="small_cnn", backbone_args={"widths": [4, 8]})
    with pytest.raises(
        ConfigError,
        match=r"^optim.param_groups\[1\] \(pattern 'head.\*'\) claims no parameter, so its settings would be ignored: every parameter it "
        r"matches \(2, e.g. head.2.weight\) is taken by the earlier optim.param_groups\[0\] \(pattern 'head.\*'\)",
    ):
        build_optimizer(model, OptimConfig(param_groups=[{"pattern": "head.*"}, {"pattern": "head.*", "lr_mult": 2}]))
    with pytest.raises(
        ConfigError,
        match=r"optim.param_groups\[2\] .* taken by the earlier optim.param_groups\[0\] \(pattern 'head.2.weight'\) and optim.param_groups\[1\]",
    ):
        build_optimizer(
            model,
            OptimConfig(
                param_groups=[
                    {"pattern": "head.2.weight"},
                    {"pattern": "head.2.bias"},
                    {"pattern": "head.*", "lr_mult": 2},
                ]
            ),
        )
    build_optimizer(
        model,
        OptimConfig(
            param_groups=[{"pattern": "backbone.stages.0.*", "lr_mult": 0.5}, {"pattern": "backbone.*", "lr_mult": 0.1}]
        ),
    )


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"name": "MulticlassAccuracy", "as": "top1"},
            r"^eval.extra_metrics\[0\] \(MulticlassAccuracy\) would be reported as 'top1', a name eval.metric=classification already reports",
        ),
        (
            {"name": "MulticlassAccuracy", "as": "loss"},
            r"would be reported as 'loss', a name every evaluation already reports",
        ),
        ({"name": "MulticlassAccuracy", "as": "samples"}, r"would be reported as 'samples'"),
        (
            {"name": "MulticlassAccuracy", "as": "ema_acc"},
            r"would be reported as 'ema_acc', but names starting with ema_ are the EMA's",
        ),
        (
            {"name": "MulticlassAccuracy", "as": 5},
            r"^config key 'eval.extra_metrics\[0\].as' must be a plain name .*got 5$",
        ),
        (
            {"name": "MulticlassAccuracy", "as": ""},
            r"^config key 'eval.extra_metrics\[0\].as' must be a plain name .*got ''$",
        ),
        (
            {"name": "MulticlassAccuracy", "as": "a/b"},
            r"^config key 'eval.extra_metrics\[0\].as' must be a plain name .*got 'a/b'$",
        ),
    ],
)
def test_an_extra_metric_reports_under_a_plain_name_no_one_else_reports(spec, message):
    pytest.importorskip("torchmetrics")
    with pytest.raises(ConfigError, match=message):
        check_extras([spec], "classification", 10)
    with pytest.raises(
        ConfigError,
        match=r"eval.extra_metrics\[1\] \(MulticlassF1Score\) would be reported as 'acc', a name eval.extra_metrics\[0\] already reports",
    ):
        check_extras(
            [{"name": "MulticlassAccuracy", "as": "acc"}, {"name": "MulticlassF1Score", "as": "acc"}],
            "classification",
            10,
        )
    check_extras([{"name": "MulticlassAccuracy", "as": "acc"}, {"name": "MulticlassAccuracy"}], "classification", 10)
