"""Values that passed the checks and then broke or misled: transforms tried on a fake sample, hook
arguments and tasks, timm's own arguments, loss weights, the data's shape against model.input_size,
a batch larger than the data, param groups that claim nothing, extra metrics' names, test-mode sizes.

(The one-line errors as main.py prints them: tests/cli/test_more_bad_input.py.)
"""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, TensorDataset

from utils.config import DataConfig, OptimConfig, load_config
from utils.data.input_shape import check_input_shape, check_test_size
from utils.data.loader import build_train_loader
from utils.data.transforms import check_transforms
from utils.errors import ConfigError, DataError
from utils.hook.selection import task_hooks
from utils.metrics.extra import check_extras
from utils.optim.optimizers import build_optimizer
from utils.references import check_references
from utils.registry import BACKBONES, NETWORKS


def refused(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_references(load_config(overrides=[override]))


@pytest.mark.parametrize("override, message", [
    ("data.train_transforms=[{name: RandomRotation, degrees: .nan}]",
     r"^data.train_transforms\[0\] \(RandomRotation\) fails on a sample of model.input_size=\[1, 8, 8\]: RuntimeError: from is out of bounds"),
    ("data.train_transforms=[{name: Normalize, mean: [0.5], std: [0]}]", r"^data.train_transforms\[0\] \(Normalize\) fails .*: ValueError: std evaluated to zero"),
    ("data.train_transforms=[{name: RandomHorizontalFlip}, {name: RandomCrop, size: -3}]",
     r"^data.train_transforms\[1\] \(RandomCrop\) turns a sample of model.input_size=\[1, 8, 8\] into an empty one of shape \[1, 0, \d+\]"),
    ("data.train_transforms=[{name: Resize, size: 0}]", r"^data.train_transforms\[0\] \(Resize\) fails .*RuntimeError: Input and output sizes should be greater than 0"),
    ("data.eval_transforms=[{name: Lambda, lambd: 1}]", r"^data.eval_transforms\[0\] \(Lambda\) fails .*TypeError: 'int' object is not callable"),
    ("data.train_transforms=[{name: ToPILImage}]", r"^data.train_transforms\[0\] \(ToPILImage\) leaves a PIL.Image, not a tensor, at the end of data.train_transforms"),
    ("data.eval_transforms=[{name: FiveCrop, size: 4}]", r"^data.eval_transforms\[0\] \(FiveCrop\) leaves a tuple, not a tensor"),
    ("data.train_transforms=[{name: GaussianBlur, kernel_size: 4}]", r"^data.train_transforms\[0\] \(GaussianBlur\) refused its arguments \{'kernel_size': 4\}: Kernel size value should be an odd"),
    ("data.train_transforms=[{name: RandomCrop, size: 4}, {name: RandomRotaton}]", r"^data.train_transforms\[1\]: unknown transform 'RandomRotaton' .*did you mean 'RandomRotation'\?"),
])
def test_each_transform_list_is_tried_on_a_fake_sample_of_the_input_size(override, message):
    refused(override, message)


def test_transforms_that_work_pass_and_a_crop_larger_than_the_input_size_is_left_to_the_data():
    check_references(load_config(overrides=["data.train_transforms=[{name: RandomCrop, size: 8, padding: 1}, {name: ToPILImage}, {name: PILToTensor}]"]))
    check_references(load_config(overrides=["data.train_transforms=[{name: RandomCrop, size: 12}, {name: Normalize, mean: [0.5], std: [0.2]}]"]))  # the images may be larger
    check_transforms([{"name": "Resize", "size": [6, 6]}, {"name": "Normalize", "mean": [0.5] * 3, "std": [0.2] * 3}], "data.eval_transforms", [3, 4, 8, 8])  # a clip
    with pytest.raises(ConfigError, match=r"^data.eval_transforms\[0\] \(Normalize\) fails on a sample of model.input_size=\[3, 4, 8, 8\]"):
        check_transforms([{"name": "Normalize", "mean": [0.5] * 3, "std": [0.0] * 3}], "data.eval_transforms", [3, 4, 8, 8])
    check_transforms([{"name": "Lambda", "lambd": 1}], "data.eval_transforms", None)  # no input size: built, not tried


def test_checking_transforms_draws_nothing_from_any_generator():
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    check_transforms([{"name": "RandomResizedCrop", "size": 6}, {"name": "RandomRotation", "degrees": 30}, {"name": "ColorJitter", "brightness": 0.5}],
                     "data.train_transforms", [1, 8, 8])
    assert torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1] and np.random.rand() == expected[2]


@pytest.mark.parametrize("override, message", [
    ("hooks=[{name: confident_mistakes, per_row: 0}]", r"'hooks\[0\].per_row' must be an integer >= 1 \(an argument of hook 'confident_mistakes'\), got 0"),
    ("hooks=[{name: confident_mistakes, images: -1}]", r"'hooks\[0\].images' must be an integer >= 1"),
    ("hooks=[{name: confusion_matrix}, {name: confident_mistakes, size: 0}]", r"'hooks\[1\].size' must be an integer >= 1"),
    ("hooks=[{name: confusion_matrix, splits: [bogus]}]", r"'hooks\[0\].splits' must be a list of values from \['val', 'test'\] with at least one entry .*got \['bogus'\]"),
    ("hooks=[{name: confusion_matrix, splits: []}]", r"'hooks\[0\].splits' must be a list of values from \['val', 'test'\] with at least one entry"),
    ("hooks=[{name: saliency_grid}]", r"^config key 'hooks\[0\]' turns on hook 'saliency_grid', which serves eval.metric sod, but this run's eval.metric is classification; remove the entry"),
    ("hooks=[{name: ClipStrips, clips: 2}]", r"turns on hook 'clip_strips', which serves eval.metric video, but this run's eval.metric is classification"),
])
def test_hook_arguments_have_ranges_and_choices_and_a_hook_serves_the_runs_task(override, message):
    refused(override, message)


def test_a_hook_of_another_task_may_be_switched_off_and_one_without_tasks_runs_anywhere():
    check_references(load_config(overrides=["hooks=[{name: saliency_grid, enabled: false}, {name: confident_mistakes, splits: [val, test]}]"]))
    assert "SaliencyGrid" not in [type(hook).__name__ for hook in task_hooks("classification", [{"name": "saliency_grid", "enabled": False}])]
    with pytest.raises(ConfigError, match=r"turns on hook 'saliency_grid'"):
        task_hooks("classification", [{"name": "saliency_grid"}])


TIMM = "model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: resnet18, in_chans: 1%s}}"


@pytest.mark.parametrize("extra, message", [
    (", out_indices: []", r"'model.args.backbone_args.out_indices' must be a list of integers with at least one entry or null \(an argument of backbone 'timm'\), got \[\]"),
    (", features_only: false", r"^backbone timm: features_only is set by the backbone itself .*; remove it from model.args.backbone_args$"),
    (", drop_rate: .nan", r"'model.args.backbone_args.drop_rate' must be a number in \[0, 1\) \(an argument of backbone 'timm'\), got nan"),
    (", drop_rate: 5", r"'model.args.backbone_args.drop_rate' must be a number in \[0, 1\) .*got 5 \(int\)"),
    (", drop_path_rate: -0.1", r"'model.args.backbone_args.drop_path_rate' must be a number in \[0, 1\)"),
    (", in_channels: 3", r"^backbone timm: in_chans=1 and in_channels=3 disagree \(both give the input's channel count; one would be ignored\); give the count once"),
])
def test_timm_arguments_the_backbone_sets_ranges_and_channel_conflicts(extra, message):
    pytest.importorskip("timm")
    refused(TIMM % extra, message)


def test_timm_channel_conflicts_are_refused_when_built_too():
    pytest.importorskip("timm")
    check_references(load_config(overrides=[TIMM % ", in_channels: 1, drop_path_rate: 0.1"]))  # agreeing counts, a rate in range
    with pytest.raises(ConfigError, match=r"in_chans=1 and in_channels=3 disagree"):  # the network passes in_channels=3
        NETWORKS.build("fpn_sod", backbone="timm", backbone_args={"model_name": "resnet18", "in_chans": 1})
    with pytest.raises(ConfigError, match=r"features_only is set by the backbone itself"):
        BACKBONES.build("timm", model_name="resnet18", features_only=False)


@pytest.mark.parametrize("weight", [".nan", ".inf"])
def test_loss_weights_must_be_finite(weight):
    with pytest.raises(ConfigError, match=r"^config key 'loss\[0\].weight' must be a finite number >= 0, got (nan|inf)$"):
        load_config(overrides=[f"loss=[{{name: cross_entropy, weight: {weight}}}]"])


class Drawing(Dataset):
    """Samples of ``shape`` whose reading draws from torch, python and numpy (as random augmentation does)."""

    def __init__(self, shape: tuple) -> None:
        self.shape = shape

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int):
        random.random(), np.random.rand()
        return torch.rand(*self.shape), 0


def test_a_sample_must_have_the_dimensions_and_channels_of_model_input_size(caplog):
    with pytest.raises(ConfigError, match=r"^model.input_size=\[3, 8, 8\] does not fit the data: a sample of the val split is \[1, 8, 8\] after "
                                          r"data.eval_transforms \(channels, height, width\); set model.input_size=\[1, 8, 8\]$"):
        check_input_shape(Drawing((1, 8, 8)), [3, 8, 8])
    with pytest.raises(ConfigError, match=r"^model.input_size=\[1, 8\] does not fit the data: a sample of the val split is \[1, 8, 8\]"):
        check_input_shape(Drawing((1, 8, 8)), [1, 8])
    with caplog.at_level(logging.WARNING):
        check_input_shape(Drawing((1, 8, 8)), [1, 16, 16])
    assert "model.input_size=[1, 16, 16], but a sample of the val split is [1, 8, 8]" in caplog.text and "set model.input_size=[1, 8, 8]" in caplog.text
    torch.manual_seed(2), random.seed(2), np.random.seed(2)
    expected = (torch.rand(2), random.random(), np.random.rand())
    torch.manual_seed(2), random.seed(2), np.random.seed(2)
    check_input_shape(Drawing((3, 4, 8, 8)), [3, 4, 8, 8])  # fits; reading the sample drew nothing training would draw
    assert torch.equal(torch.rand(2), expected[0]) and random.random() == expected[1] and np.random.rand() == expected[2]
    check_input_shape(Drawing((1, 8, 8)), None)


def test_a_batch_larger_than_the_data_is_one_smaller_batch_with_a_warning(caplog):
    data = TensorDataset(torch.zeros(10, 1, 2, 2), torch.zeros(10, dtype=torch.long))
    with caplog.at_level(logging.WARNING):
        loader = build_train_loader(data, DataConfig(batch_size=64, drop_last=True, prefetch="none"), 0, 1, 0)
    assert len(loader) == 1
    assert "data.batch_size=64 is more than the 10 training samples per process: each epoch is one step of a 10-sample batch " \
           "(data.drop_last=true would drop it and leave no step, so it is kept); set data.batch_size to at most 10" in caplog.text
    caplog.clear()
    build_train_loader(data, DataConfig(batch_size=5, prefetch="none"), 0, 1, 0)
    assert "data.batch_size" not in caplog.text


def test_each_param_group_must_claim_a_parameter_no_earlier_group_took():
    model = NETWORKS.build("classifier", num_classes=4, backbone="small_cnn", backbone_args={"widths": [4, 8]})
    with pytest.raises(ConfigError, match=r"^optim.param_groups\[1\] \(pattern 'head.\*'\) claims no parameter, so its settings would be ignored: every parameter it "
                                          r"matches \(2, e.g. head.2.weight\) is taken by the earlier optim.param_groups\[0\] \(pattern 'head.\*'\)"):
        build_optimizer(model, OptimConfig(param_groups=[{"pattern": "head.*"}, {"pattern": "head.*", "lr_mult": 2}]))
    with pytest.raises(ConfigError, match=r"optim.param_groups\[2\] .* taken by the earlier optim.param_groups\[0\] \(pattern 'head.2.weight'\) and optim.param_groups\[1\]"):
        build_optimizer(model, OptimConfig(param_groups=[{"pattern": "head.2.weight"}, {"pattern": "head.2.bias"}, {"pattern": "head.*", "lr_mult": 2}]))
    build_optimizer(model, OptimConfig(param_groups=[{"pattern": "backbone.stages.0.*", "lr_mult": 0.5}, {"pattern": "backbone.*", "lr_mult": 0.1}]))


@pytest.mark.parametrize("spec, message", [
    ({"name": "MulticlassAccuracy", "as": "top1"}, r"^eval.extra_metrics\[0\] \(MulticlassAccuracy\) would be reported as 'top1', a name eval.metric=classification already reports"),
    ({"name": "MulticlassAccuracy", "as": "loss"}, r"would be reported as 'loss', a name every evaluation already reports"),
    ({"name": "MulticlassAccuracy", "as": "samples"}, r"would be reported as 'samples'"),
    ({"name": "MulticlassAccuracy", "as": "ema_acc"}, r"would be reported as 'ema_acc', but names starting with ema_ are the EMA's"),
    ({"name": "MulticlassAccuracy", "as": 5}, r"^config key 'eval.extra_metrics\[0\].as' must be a plain name .*got 5$"),
    ({"name": "MulticlassAccuracy", "as": ""}, r"^config key 'eval.extra_metrics\[0\].as' must be a plain name .*got ''$"),
    ({"name": "MulticlassAccuracy", "as": "a/b"}, r"^config key 'eval.extra_metrics\[0\].as' must be a plain name .*got 'a/b'$"),
])
def test_an_extra_metric_reports_under_a_plain_name_no_one_else_reports(spec, message):
    pytest.importorskip("torchmetrics")
    with pytest.raises(ConfigError, match=message):
        check_extras([spec], "classification", 10)
    with pytest.raises(ConfigError, match=r"eval.extra_metrics\[1\] \(MulticlassF1Score\) would be reported as 'acc', a name eval.extra_metrics\[0\] already reports"):
        check_extras([{"name": "MulticlassAccuracy", "as": "acc"}, {"name": "MulticlassF1Score", "as": "acc"}], "classification", 10)
    check_extras([{"name": "MulticlassAccuracy", "as": "acc"}, {"name": "MulticlassAccuracy"}], "classification", 10)


def test_test_mode_holds_the_test_split_to_the_trained_size():
    fix = "data.eval_transforms=[{name: Resize, size: [16, 16]}]"
    check_test_size(Drawing((1, 16, 16)), [1, 16, 16], fix)
    with pytest.raises(DataError, match=r"^the test split reaches the network at 8x8 \(width x height, after data.eval_transforms\), but the checkpoint was trained at 16x16 "
                                        r"\(model.input_size=\[1, 16, 16\]\); resize the test data to 16x16, or let the test resize it: data.eval_transforms=\[\{name: Resize"):
        check_test_size(Drawing((1, 8, 8)), [1, 16, 16], fix)
    check_test_size(Drawing((1, 8, 8)), None, fix)
