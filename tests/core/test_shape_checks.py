"""Values that passed the checks and then broke or misled, held against the data's shape: each transform list
tried on a fake sample of model.input_size (drawing from no generator), model.input_size against one sample of
the data, a batch larger than the data, and the test split against the size the checkpoint was trained at.

(Hook, timm, loss, param group and extra-metric arguments: tests/core/test_argument_checks.py; the one-line
errors as main.py prints them: tests/cli/test_more_bad_input.py.)
"""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset, TensorDataset

from tests.fixtures.config_checks import refused
from utils.config.load import load_config
from utils.config.schema import DataConfig
from utils.data.input_shape import check_input_shape, check_test_size
from utils.data.loader import build_train_loader
from utils.data.transforms import check_transforms
from utils.errors import ConfigError, DataError
from utils.references import check_references


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "data.train_transforms=[{name: RandomRotation, degrees: .nan}]",
            r"^data.train_transforms\[0\] \(RandomRotation\) fails on a sample of model.input_size=\[1, 8, 8\]: RuntimeError: from is out of bounds",
        ),
        (
            "data.train_transforms=[{name: Normalize, mean: [0.5], std: [0]}]",
            r"^data.train_transforms\[0\] \(Normalize\) fails .*: ValueError: std evaluated to zero",
        ),
        (
            "data.train_transforms=[{name: RandomHorizontalFlip}, {name: RandomCrop, size: -3}]",
            r"^data.train_transforms\[1\] \(RandomCrop\) turns a sample of model.input_size=\[1, 8, 8\] into an empty one of shape \[1, 0, \d+\]",
        ),
        (
            "data.train_transforms=[{name: Resize, size: 0}]",
            r"^data.train_transforms\[0\] \(Resize\) fails .*RuntimeError: Input and output sizes should be greater than 0",
        ),
        (
            "data.eval_transforms=[{name: Lambda, lambd: 1}]",
            r"^data.eval_transforms\[0\] \(Lambda\) fails .*TypeError: 'int' object is not callable",
        ),
        (
            "data.train_transforms=[{name: ToPILImage}]",
            r"^data.train_transforms\[0\] \(ToPILImage\) leaves a PIL.Image, not a tensor, at the end of data.train_transforms",
        ),
        (
            "data.eval_transforms=[{name: FiveCrop, size: 4}]",
            r"^data.eval_transforms\[0\] \(FiveCrop\) leaves a tuple, not a tensor",
        ),
        (
            "data.train_transforms=[{name: GaussianBlur, kernel_size: 4}]",
            r"^data.train_transforms\[0\] \(GaussianBlur\) refused its arguments \{'kernel_size': 4\}: Kernel size value should be an odd",
        ),
        (
            "data.train_transforms=[{name: RandomCrop, size: 4}, {name: RandomRotaton}]",
            r"^data.train_transforms\[1\]: unknown transform 'RandomRotaton' .*did you mean 'RandomRotation'\?",
        ),
    ],
)
def test_each_transform_list_is_tried_on_a_fake_sample_of_the_input_size(override, message):
    refused(override, message)


def test_transforms_that_work_pass_and_a_crop_larger_than_the_input_size_is_left_to_the_data():
    check_references(
        load_config(
            overrides=[
                "data.train_transforms=[{name: RandomCrop, size: 8, padding: 1}, {name: ToPILImage}, {name: PILToTensor}]"
            ]
        )
    )
    # the images may be larger
    check_references(
        load_config(
            overrides=[
                "data.train_transforms=[{name: RandomCrop, size: 12}, {name: Normalize, mean: [0.5], std: [0.2]}]"
            ]
        )
    )
    # a clip
    check_transforms(
        [{"name": "Resize", "size": [6, 6]}, {"name": "Normalize", "mean": [0.5] * 3, "std": [0.2] * 3}],
        "data.eval_transforms",
        [3, 4, 8, 8],
    )
    with pytest.raises(
        ConfigError,
        match=r"^data.eval_transforms\[0\] \(Normalize\) fails on a sample of model.input_size=\[3, 4, 8, 8\]",
    ):
        check_transforms(
            [{"name": "Normalize", "mean": [0.5] * 3, "std": [0.0] * 3}], "data.eval_transforms", [3, 4, 8, 8]
        )
    check_transforms([{"name": "Lambda", "lambd": 1}], "data.eval_transforms", None)  # no input size: built, not tried


def test_checking_transforms_draws_nothing_from_any_generator():
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.manual_seed(1), random.seed(1), np.random.seed(1)
    check_transforms(
        [
            {"name": "RandomResizedCrop", "size": 6},
            {"name": "RandomRotation", "degrees": 30},
            {"name": "ColorJitter", "brightness": 0.5},
        ],
        "data.train_transforms",
        [1, 8, 8],
    )
    assert (
        torch.equal(torch.rand(3), expected[0]) and random.random() == expected[1] and np.random.rand() == expected[2]
    )


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
    with pytest.raises(
        ConfigError,
        match=r"^model.input_size=\[3, 8, 8\] does not fit the data: a sample of the val split is \[1, 8, 8\] after "
        r"data.eval_transforms \(channels, height, width\); set model.input_size=\[1, 8, 8\]$",
    ):
        check_input_shape(Drawing((1, 8, 8)), [3, 8, 8])
    with pytest.raises(
        ConfigError, match=r"^model.input_size=\[1, 8\] does not fit the data: a sample of the val split is \[1, 8, 8\]"
    ):
        check_input_shape(Drawing((1, 8, 8)), [1, 8])
    with caplog.at_level(logging.WARNING):
        check_input_shape(Drawing((1, 8, 8)), [1, 16, 16])
    assert (
        "model.input_size=[1, 16, 16], but a sample of the val split is [1, 8, 8]" in caplog.text
        and "set model.input_size=[1, 8, 8]" in caplog.text
    )
    torch.manual_seed(2), random.seed(2), np.random.seed(2)
    expected = (torch.rand(2), random.random(), np.random.rand())
    torch.manual_seed(2), random.seed(2), np.random.seed(2)
    check_input_shape(Drawing((3, 4, 8, 8)), [3, 4, 8, 8])  # fits; reading the sample drew nothing training would draw
    assert (
        torch.equal(torch.rand(2), expected[0]) and random.random() == expected[1] and np.random.rand() == expected[2]
    )
    check_input_shape(Drawing((1, 8, 8)), None)


def test_a_batch_larger_than_the_data_is_one_smaller_batch_with_a_warning(caplog):
    data = TensorDataset(torch.zeros(10, 1, 2, 2), torch.zeros(10, dtype=torch.long))
    with caplog.at_level(logging.WARNING):
        loader = build_train_loader(data, DataConfig(batch_size=64, drop_last=True, prefetch="none"), 0, 1, 0)
    assert len(loader) == 1
    assert (
        "data.batch_size=64 is more than the 10 training samples per process: each epoch is one step of a 10-sample batch "
        "(data.drop_last=true would drop it and leave no step, so it is kept); set data.batch_size to at most 10"
        in caplog.text
    )
    caplog.clear()
    build_train_loader(data, DataConfig(batch_size=5, prefetch="none"), 0, 1, 0)
    assert "data.batch_size" not in caplog.text


def test_test_mode_holds_the_test_split_to_the_trained_size():
    fix = "data.eval_transforms=[{name: Resize, size: [16, 16]}]"
    check_test_size(Drawing((1, 16, 16)), [1, 16, 16], fix)
    with pytest.raises(
        DataError,
        match=r"^the test split reaches the network at 8x8 \(width x height, after data.eval_transforms\), but the checkpoint was trained at 16x16 "
        r"\(model.input_size=\[1, 16, 16\]\); resize the test data to 16x16, or let the test resize it: data.eval_transforms=\[\{name: Resize",
    ):
        check_test_size(Drawing((1, 8, 8)), [1, 16, 16], fix)
    check_test_size(Drawing((1, 8, 8)), None, fix)
