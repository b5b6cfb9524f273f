"""Every value is checked where it enters: plugin arguments against their annotations, float keys,
param groups, the warm-up, small splits, hook lists, torchmetrics classes and the zero-step run.

(The one-line errors as main.py prints them are cases of tests/cli/test_bad_input.py.)
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Dict, List, Literal, Optional, Sequence, Tuple, Union

import numpy as np
import pytest

from utils.config.arguments import Count, Fraction, at_least, check_values, in_range
from utils.config.load import load_config
from utils.config.schema import ScheduleConfig
from utils.config.typed_merge import type_name
from utils.data.datasets.digits import load_digits, split_indices
from utils.data.stratified import stratified_split
from utils.engine.training_length import check_takes_steps
from utils.errors import ConfigError, DataError, RegistryError
from utils.hook.selection import task_hooks
from utils.metrics.extra import check_extra_classes, check_extras
from utils.optim.optimizers import check_group_keys
from utils.optim.schedules import lr_factor_fn
from utils.references import check_references
from utils.registry import LOSSES, NETWORKS, Registry


class Typed:
    """A plugin whose constructor declares what each argument takes."""

    def __init__(
        self,
        count: Count,
        share: Fraction = 0.5,
        mode: Literal["a", "b"] = "a",
        sizes: Sequence[Annotated[int, at_least(2)]] = (2,),
        pair: Optional[Tuple[int, int]] = None,
        either: Union[int, str] = 1,
        table: Dict[str, int] = None,
        scale: float = 1.0,
    ) -> None:
        self.count = count


class Unannotated:
    def __init__(self, count, share=0.5) -> None:
        self.count = count


class Unresolvable:
    def __init__(self, count: "NameOnlyATypeCheckerSees" = 1) -> None:  # noqa: F821
        self.count = count


@pytest.mark.parametrize(
    "args, message",
    [
        ({"count": 2.0}, r"'p.count' must be an integer >= 1 \(an argument of thing 'typed'\), got 2.0 \(float\)"),
        ({"count": True}, r"'p.count' must be an integer >= 1 .*got True \(bool\)"),
        ({"count": 0}, r"'p.count' must be an integer >= 1"),
        ({"count": 1, "share": 1}, r"'p.share' must be a number in \(0, 1\)"),
        ({"count": 1, "mode": "c"}, r"'p.mode' must be one of \['a', 'b'\]"),
        ({"count": 1, "sizes": [2, 1]}, r"'p.sizes' must be a list of integers >= 2 .*, got \[2, 1\]"),
        ({"count": 1, "sizes": "22"}, r"'p.sizes' must be a list of integers >= 2 .*, got '22' \(str\)"),
        ({"count": 1, "pair": [1, 2, 3]}, r"'p.pair' must be a list of 2 integers or null"),
        ({"count": 1, "either": [1]}, r"'p.either' must be an integer or a string"),
        ({"count": 1, "table": [1]}, r"'p.table' must be a mapping"),
        (
            {"count": 1, "scale": float("inf")},
            r"'p.scale' must be a finite number \(an argument of thing 'typed'\), got inf",
        ),
    ],
)
def test_arguments_are_checked_against_the_annotations_and_ranges(args, message):
    with pytest.raises(ConfigError, match=message):
        check_values("thing 'typed'", "p", Typed, args)


def test_fitting_arguments_and_plugins_without_annotations_pass():
    check_values(
        "thing 'typed'",
        "p",
        Typed,
        {
            "count": 3,
            "share": 0.25,
            "mode": "b",
            "sizes": [2, 3],
            "pair": [1, 2],
            "either": "x",
            "table": {"a": 1},
            "scale": 2,
        },
    )
    # a user's plugin keeps working unchecked
    check_values("thing", "p", Unannotated, {"count": "anything", "share": None})
    check_values("thing", "p", Unresolvable, {"count": "anything"})


def test_type_names_in_words():
    assert type_name(Optional[Dict[str, int]], "{decay: 0.9998}") == "a mapping (e.g. {decay: 0.9998}) or null"
    assert type_name(List[float]) == "a list of numbers"
    assert type_name(Union[bool, Dict[str, int], None]) == "true/false, a mapping or null"
    assert type_name(Annotated[float, in_range(0, 1, high_open=True)]) == "a number in [0, 1)"


def test_nested_backbone_arguments_go_to_the_backbone_registry():
    check_references(load_config(overrides=["model.args.backbone_args={in_channels: 1, widths: [8, 16]}"]))
    with pytest.raises(
        ConfigError,
        match=r"'model.args.backbone_args.in_channels' must be an integer >= 1 \(an argument of backbone 'small_cnn'\)",
    ):
        check_references(load_config(overrides=["model.args.backbone_args={in_channels: 0}"]))
    with pytest.raises(ConfigError, match=r"'model.args.temporal_pool' must be one of \['avg', 'max'\]"):
        check_references(
            load_config(overrides=["model.name=video_classifier", "model.args={num_classes: 3, temporal_pool: mean}"])
        )
    with pytest.raises(ConfigError, match=r"'data.args.split' is set by the framework"):
        check_references(load_config(overrides=["data.args.split=val"]))


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=.nan", r"'optim.lr' must be a finite number, got nan"),
        ("train.clip_grad_norm=.inf", r"'train.clip_grad_norm' must be a finite number, got inf"),
        ("optim.betas=[0.9, .nan]", r"'optim.betas' must hold finite numbers only"),
    ],
)
def test_every_float_key_must_be_finite(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config(overrides=[override])


@pytest.mark.parametrize(
    "spec, message",
    [
        (
            {"pattern": "head.*", "weight_decay": -0.1},
            r"'optim.param_groups\[0\].weight_decay' must be a finite number >= 0, got -0.1",
        ),
        (
            {"pattern": "head.*", "lr_mult": "x"},
            r"'optim.param_groups\[0\].lr_mult' must be a finite number >= 0, got 'x'",
        ),
        ({"pattern": 3}, r"'optim.param_groups\[0\].pattern' must be a name pattern or a non-empty list of them"),
        ({"pattern": ["head.*", 2]}, r"'optim.param_groups\[0\].pattern' must be a name pattern"),
    ],
)
def test_param_group_values_are_typed_and_ranged(spec, message):
    with pytest.raises(ConfigError, match=message):
        check_group_keys([spec])
    check_group_keys([{"pattern": ["head.*", "*.bias"], "lr_mult": 0, "weight_decay": 0.0}])


def test_a_warm_up_longer_than_a_run_in_steps_is_a_warning_naming_the_numbers(caplog):
    # a run in steps: checked when its steps are known
    load_config(overrides=["schedule.warmup_epochs=5", "train.epochs=1", "train.iterations=2"])
    factor = lr_factor_fn(ScheduleConfig(name="cosine", warmup_epochs=1), iters_per_epoch=22, total_iters=2)
    assert "schedule.warmup_epochs=1 is 22 steps (22 per epoch), longer than the run's 2 steps" in caplog.text
    assert factor(1) == 1.0  # cut to the run, as before
    caplog.clear()
    # 1 epoch of 1: no warning
    lr_factor_fn(ScheduleConfig(name="cosine", warmup_epochs=1), iters_per_epoch=22, total_iters=22)
    assert "warmup" not in caplog.text


def test_a_split_too_small_for_every_class_is_drawn_at_random_with_a_warning(caplog):
    labels = load_digits()[1]
    with caplog.at_level(logging.WARNING):
        splits = split_indices(labels, 0.001, 0.2, 0)
    assert re.search(
        r"digits: the val split \(data.args.val_fraction=0.001\): 1435 \+ 2 of 1437 samples cannot hold each of the 10 classes",
        caplog.text,
    )
    assert [len(splits[s]) for s in ("train", "val", "test")] == [1435, 2, 360]
    assert len(set(np.concatenate(list(splits.values())).tolist())) == 1797
    # the stratified test split is unchanged
    assert np.array_equal(splits["test"], split_indices(labels, 0.1, 0.2, 0)["test"])
    train, test = stratified_split(np.array([0, 0, 1, 1, 2]), 0.4, 0, "tiny")  # class 2 has one sample
    assert sorted([*train, *test]) == [0, 1, 2, 3, 4] and len(test) == 2 and "tiny: 3 + 2 of 5 samples" in caplog.text


def test_a_run_that_would_take_no_step_names_the_samples_the_batch_and_drop_last():
    check_takes_steps(1, 1, 64, True, True)
    with pytest.raises(
        DataError,
        match=r"the training split has 1 sample\(s\) per process and data.batch_size is 64; its only batch would hold 1 sample, .*BatchNorm.*data.drop_last",
    ):
        check_takes_steps(0, 1, 64, True, True)
    with pytest.raises(
        DataError,
        match=r"has 3 sample\(s\) per process and data.batch_size is 8; data.drop_last=true drops the incomplete batch; .*set data.drop_last=false",
    ):
        check_takes_steps(0, 3, 8, True, False)


def test_a_hook_named_twice_is_refused_where_the_hooks_are_built():
    with pytest.raises(ConfigError, match=r"names hook 'confusion_matrix' twice \(hooks\[0\] and hooks\[1\]\)"):
        task_hooks(
            "classification",
            [{"name": "confusion_matrix", "splits": ["val"]}, {"name": "confusion_matrix", "enabled": False}],
        )


def test_torchmetrics_classes_are_tried_on_the_task_outputs_and_the_class_count():
    check_extras(
        [{"name": "MulticlassF1Score", "average": "macro"}, {"name": "MulticlassAccuracy", "num_classes": 10}],
        "classification",
        10,
    )
    check_extras([{"name": "BinaryF1Score"}], "sod", None)
    with pytest.raises(
        ConfigError,
        match=r"eval.extra_metrics\[0\] \(MulticlassF1Score\) does not fit the outputs of eval.metric=sod: given logits \[2, 1, 8, 8\]",
    ):
        check_extras([{"name": "MulticlassF1Score", "num_classes": 2}], "sod", None)
    with pytest.raises(
        ConfigError,
        match=r"\(MulticlassF1Score\) has num_classes=10, but the data has 3 classes; leave num_classes out .* or set it to 3",
    ):
        check_extra_classes([{"name": "MulticlassF1Score", "num_classes": 10}], 3)


def test_a_name_of_another_registry_says_what_it_is_and_how_to_use_it():
    with pytest.raises(
        RegistryError,
        match=r"unknown network 'cross_entropy': cross_entropy is a loss, not a network; use it in loss=\[\{name: cross_entropy\}\]",
    ):
        NETWORKS.get("cross_entropy")
    with pytest.raises(
        RegistryError,
        match=r"unknown loss 'small_cnn': small_cnn is a backbone, not a loss; a network takes it: model.name=classifier model.args.backbone=small_cnn",
    ):
        LOSSES.get("small_cnn")
    own = Registry("network")  # a registry of a test's own: its unknown names are as before
    with pytest.raises(RegistryError, match=r"unknown network 'nope'; known: \(none\)"):
        own.get("nope")


def test_a_missing_config_file_suggests_the_closest_one_beside_it(tmp_path):
    (tmp_path / "digits_small.yaml").write_text("seed: 1\n")
    with pytest.raises(
        ConfigError,
        match=re.escape(
            f"config file '{tmp_path / 'digits_smal.yaml'}' does not exist; did you mean '{tmp_path / 'digits_small.yaml'}'?"
        ),
    ):
        load_config(tmp_path / "digits_smal.yaml")
    with pytest.raises(ConfigError, match=r"does not exist; pass an existing YAML file to --config"):
        load_config(tmp_path / "nothing_like_it.yaml")
