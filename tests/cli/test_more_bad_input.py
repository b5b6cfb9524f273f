"""The tester's values that passed the checks and then broke or misled: each is now one ``error:`` line
(exit code 2, no traceback), or runs with a warning naming the numbers. Rows of the README's "Bad input" table.

Each case runs the default digits experiment as the tester did (a small network, 2 steps, 1 thread).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List

import pytest

import main

QUICK = ["model.args.backbone_args={widths: [8, 16]}", "threads=1", "train.iterations=2"]
TIMM = "model.args={num_classes: 10, backbone: timm, backbone_args: {model_name: resnet18, in_chans: 1%s}}"

# name -> (overrides, the error line)
CASES: Dict[str, tuple] = {
    "a transform that fails on a sample": (
        ["data.train_transforms=[{name: RandomRotation, degrees: .nan}]"],
        r"^error: data.train_transforms\[0\] \(RandomRotation\) fails on a sample of model.input_size=\[1, 8, 8\]: RuntimeError: from is out of bounds for float; fix its arguments or remove it$",
    ),
    "a zero std": (
        ["data.train_transforms=[{name: Normalize, mean: [0.5], std: [0]}]"],
        r"^error: data.train_transforms\[0\] \(Normalize\) fails .*ValueError: std evaluated to zero",
    ),
    "a negative crop": (
        ["data.train_transforms=[{name: RandomCrop, size: -3}]"],
        r"^error: data.train_transforms\[0\] \(RandomCrop\) turns a sample of .* into an empty one",
    ),
    "a resize to 0": (
        ["data.train_transforms=[{name: Resize, size: 0}]"],
        r"^error: data.train_transforms\[0\] \(Resize\) fails .*RuntimeError: Input and output sizes should be greater than 0",
    ),
    "a number as a function": (
        ["data.eval_transforms=[{name: Lambda, lambd: 1}]"],
        r"^error: data.eval_transforms\[0\] \(Lambda\) fails .*TypeError: 'int' object is not callable",
    ),
    "a list that ends in a PIL image": (
        ["data.train_transforms=[{name: ToPILImage}]"],
        r"^error: data.train_transforms\[0\] \(ToPILImage\) leaves a PIL.Image, not a tensor, at the end of data.train_transforms: the loader batches tensors",
    ),
    "a hook argument out of range": (
        ["hooks=[{name: confident_mistakes, per_row: 0}]"],
        r"^error: config key 'hooks\[0\].per_row' must be an integer >= 1 \(an argument of hook 'confident_mistakes'\), got 0 \(int\)$",
    ),
    "a hook of another task": (
        ["hooks=[{name: saliency_grid}]"],
        r"^error: config key 'hooks\[0\]' turns on hook 'saliency_grid', which serves eval.metric sod, but this run's eval.metric is classification; remove the entry \(or set enabled: false\)$",
    ),
    "a hook image count below 1": (
        ["hooks=[{name: confident_mistakes, images: -1}]"],
        r"^error: config key 'hooks\[0\].images' must be an integer >= 1",
    ),
    "a hook size of 0": (
        ["hooks=[{name: confident_mistakes, size: 0}]"],
        r"^error: config key 'hooks\[0\].size' must be an integer >= 1",
    ),
    "a split no hook draws": (
        ["hooks=[{name: confusion_matrix, splits: [bogus]}]"],
        r"^error: config key 'hooks\[0\].splits' must be a list of values from \['val', 'test'\]",
    ),
    "timm: empty out_indices": (
        [TIMM % ", out_indices: []"],
        r"^error: config key 'model.args.backbone_args.out_indices' must be a list of integers with at least one entry or null",
    ),
    "timm: features_only": (
        [TIMM % ", features_only: false"],
        r"^error: backbone timm: features_only is set by the backbone itself",
    ),
    "timm: a NaN rate": (
        [TIMM % ", drop_rate: .nan"],
        r"^error: config key 'model.args.backbone_args.drop_rate' must be a number in \[0, 1\) \(an argument of backbone 'timm'\), got nan",
    ),
    "timm: a rate of 5": (
        [TIMM % ", drop_rate: 5"],
        r"^error: config key 'model.args.backbone_args.drop_rate' must be a number in \[0, 1\)",
    ),
    "timm: two channel counts": (
        [TIMM % ", in_channels: 3"],
        r"^error: backbone timm: in_chans=1 and in_channels=3 disagree",
    ),
    "a NaN loss weight": (
        ["loss=[{name: cross_entropy, weight: .nan}]"],
        r"^error: config key 'loss\[0\].weight' must be a finite number >= 0, got nan$",
    ),
    "a 2-d input size for images": (
        ["model.input_size=[1, 8]"],
        r"^error: model.input_size=\[1, 8\] does not fit the data: a sample of the val split is \[1, 8, 8\] after data.eval_transforms "
        r"\(channels, height, width\); set model.input_size=\[1, 8, 8\]$",
    ),
    "3 channels for grey digits": (
        ["model.input_size=[3, 8, 8]"],
        r"^error: model.input_size=\[3, 8, 8\] does not fit the data: a sample of the val split is \[1, 8, 8\]",
    ),
    "a param group that claims nothing": (
        ["optim.param_groups=[{pattern: 'head.*'}, {pattern: 'head.*', lr_mult: 2}]"],
        r"^error: optim.param_groups\[1\] \(pattern 'head.\*'\) claims no parameter, so its settings would be ignored: .* the earlier optim.param_groups\[0\]",
    ),
    "an extra metric named as the task's": (
        ["eval.extra_metrics=[{name: MulticlassAccuracy, as: top1}]"],
        r"^error: eval.extra_metrics\[0\] \(MulticlassAccuracy\) would be reported as 'top1', a name eval.metric=classification already reports",
    ),
    "an extra metric named loss": (
        ["eval.extra_metrics=[{name: MulticlassAccuracy, as: loss}]"],
        r"would be reported as 'loss', a name every evaluation already reports",
    ),
    "an extra metric named 5": (
        ["eval.extra_metrics=[{name: MulticlassAccuracy, as: 5}]"],
        r"^error: config key 'eval.extra_metrics\[0\].as' must be a plain name .*got 5$",
    ),
    "an extra metric named ''": (
        ["eval.extra_metrics=[{name: MulticlassAccuracy, as: ''}]"],
        r"^error: config key 'eval.extra_metrics\[0\].as' must be a plain name",
    ),
    "an extra metric named a/b": (
        ["eval.extra_metrics=[{name: MulticlassAccuracy, as: a/b}]"],
        r"^error: config key 'eval.extra_metrics\[0\].as' must be a plain name .*got 'a/b'$",
    ),
}


def run(tmp_path: Path, *args: str) -> List[str]:
    return ["experiment.output_root=" + str(tmp_path / "out"), "experiment.name=more", *QUICK, *args]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_value_that_broke_later_is_now_one_line_and_exit_code_2(case, tmp_path, capsys):
    overrides, expected = CASES[case]
    if "timm" in case:
        pytest.importorskip("timm")
    assert main.main(run(tmp_path, *overrides)) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert re.search(expected, errors[0]), errors[0]
    assert "Traceback" not in err


def test_spatial_sizes_and_batches_larger_than_the_data_are_warnings_naming_the_numbers(tmp_path, caplog, capsys):
    assert main.main(run(tmp_path, "model.input_size=[1, 16, 16]", "data.batch_size=5000")) == 0
    assert (
        "model.input_size=[1, 16, 16], but a sample of the val split is [1, 8, 8] after data.eval_transforms (channels, height, width)"
        in caplog.text
    )
    assert (
        "data.batch_size=5000 is more than the 1257 training samples per process: each epoch is one step of a 1257-sample batch"
        in caplog.text
    )
    assert "test: top1=" in capsys.readouterr().out


def test_test_mode_holds_the_test_split_to_the_size_the_checkpoint_was_trained_at(tmp_path, capsys):
    assert main.main(run(tmp_path, "data.args={size: 16}", "model.input_size=[1, 16, 16]")) == 0
    best = str(tmp_path / "out" / "more" / "latest" / "checkpoints" / "best.pt")
    capsys.readouterr()
    assert (
        main.main(
            ["--mode", "test", "--checkpoint", best, "threads=1", "data.eval_transforms=[{name: Resize, size: [8, 8]}]"]
        )
        == 2
    )
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert line == (
        "error: the test split reaches the network at 8x8 (width x height, after data.eval_transforms), but the checkpoint was trained at 16x16 "
        "(model.input_size=[1, 16, 16]); resize the test data to 16x16, or let the test resize it: "
        "data.eval_transforms=[{name: Resize, size: [8, 8]}, {name: Resize, size: [16, 16]}]"
    )
    assert main.main(["--mode", "test", "--checkpoint", best, "threads=1"]) == 0  # its own size: tested as before
