"""What users bring: networks that return tuples or dicts train; what breaks the contracts, config values
that would silently mean something else, and NaN metrics, are said by name."""

from __future__ import annotations

import json
import math
import os
import re

import pytest
import torch

import main
from tests.conftest import fast_overrides
from tests.fixtures.metrics_rows import rows

CONTRACTS = [
    "custom_imports=[tests.fixtures.contract_nets]",
    "model.input_size=null",
    "train.iterations=3",
    "model.args={num_classes: 10}",
]


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


@pytest.mark.parametrize(
    "network, extra",
    [
        ("tuple_net", ["loss=[{name: cross_entropy}, {name: cross_entropy, output: 1, weight: 0.4}]"]),
        (
            "dict_net",
            [
                "model.prediction_key=logits",
                "loss=[{name: cross_entropy}, {name: cross_entropy, output: aux, weight: 0.4}]",
            ],
        ),
    ],
)
def test_a_network_returning_a_tuple_or_a_dict_trains_with_auxiliary_losses(out_root, capsys, network, extra):
    assert main.main([*fast_overrides(out_root, network, epochs=1), *CONTRACTS, f"model.name={network}", *extra]) == 0
    assert "test: top1=" in capsys.readouterr().out


@pytest.mark.parametrize(
    "args, expected",
    [
        (
            ["model.name=set_net"],
            r"^error: network SetNet \(.*tests/fixtures/contract_nets.py\): the network returned a set; it must return a tensor, a tuple/list \(the prediction first\) or a dict$",
        ),
        (
            ["model.name=dict_net"],
            r"^error: network DictNet \(.*contract_nets.py\): output 'prediction' asked for, but the network returned a dict with keys \['aux', 'logits'\]; set model.prediction_key to the entry that holds the prediction$",
        ),
        (
            ["model.name=tuple_net", "loss=[{name: cross_entropy, output: 5}]"],
            r"^error: output 5 asked for, but the network returned a tuple of 2; give an index below 2$",
        ),
        (
            ["model.name=tuple_net", "loss=[{name: per_sample_cross_entropy}]"],
            r"^error: loss PerSampleCrossEntropy \(.*contract_nets.py\) returned a tensor of shape \[64\] given the prediction; a loss must return a scalar tensor \(reduce it, e.g. .mean\(\)\)$",
        ),
    ],
)
def test_what_breaks_a_contract_is_one_line_naming_the_users_class_and_file(out_root, capsys, args, expected):
    assert main.main([*fast_overrides(out_root, "broken", epochs=1), *CONTRACTS, *args]) == 2
    assert re.search(expected, one_error(capsys))


def test_nan_validation_metrics_are_a_warning_and_written_as_nan(out_root, caplog):
    assert main.main([*fast_overrides(out_root, "nan", epochs=1), *CONTRACTS, "model.name=nan_in_eval_net"]) == 0
    assert re.search(r"val metric\(s\) loss are NaN at epoch 0", caplog.text)
    run = out_root / "nan" / "latest"
    (val,) = rows(run, "val")
    assert math.isnan(val["loss"])
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run / "tb"))
    acc.Reload()
    assert math.isnan(acc.Scalars("val/loss")[0].value)


def test_eval_monitor_loss_alone_selects_the_epoch_with_the_lowest_val_loss(out_root, capsys):
    assert main.main([*fast_overrides(out_root, "byloss", epochs=3), "eval.monitor=loss", "optim.lr=0.05"]) == 0
    run = out_root / "byloss" / "latest"
    val = rows(run, "val")
    best = torch.load(run / "checkpoints" / "best.pt", weights_only=False)
    assert best["progress"]["epoch"] - 1 == min(val, key=lambda r: r["loss"])["epoch"]
    (numbered,) = [
        p for p in (run / "checkpoints").glob("epoch*.pt") if os.path.samefile(p, run / "checkpoints" / "best.pt")
    ]
    record = json.loads(numbered.with_name(numbered.name + ".val.json").read_text())  # what its validation decided
    assert record["validator"]["value"] == min(r["loss"] for r in val) and record["validator"]["file"] == numbered.name


def test_a_one_sample_last_batch_under_batchnorm_is_dropped_with_a_log_line(out_root, caplog):
    # 1257 training digits in batches of 157: 8 full batches and one of 1 sample
    assert (
        main.main(
            [
                *fast_overrides(out_root, "single", epochs=1),
                "data.drop_last=false",
                "data.batch_size=157",
                "train.iterations=10",
            ]
        )
        == 0
    )
    assert "each epoch's last training batch would hold 1 sample" in caplog.text
    state = torch.load(out_root / "single" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert state["progress"]["step"] == 10 and state["progress"]["epoch"] == 1  # epoch 0 had 8 batches
