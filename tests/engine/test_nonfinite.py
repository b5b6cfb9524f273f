"""``train.nonfinite``: skip NaN/inf steps up to a limit, stop otherwise; never checkpoint NaN weights."""

from __future__ import annotations

import logging
import re

import pytest
import torch

import main
from tests.conftest import fast_overrides
from tests.fixtures.dist_utils import run, torchrun
from utils.checkpoint.store import CheckpointStore, load_verified

NAN = ["custom_imports=[tests.fixtures.nan_net]", "model.name=nan_classifier"]


def nan_args(out_root, name, nan_at, *extra):
    args = (
        "model.args={num_classes: 10, backbone_args: {widths: [8, 16]}, nan_at: [" + ", ".join(map(str, nan_at)) + "]}"
    )
    return [*fast_overrides(out_root, name, epochs=1), *NAN, args, *extra]


def finite(state) -> bool:
    return all(bool(torch.isfinite(v).all()) for v in state["model"].values() if v.is_floating_point())


def test_stop_is_the_default_and_one_message(out_root, capsys):
    assert main.main(nan_args(out_root, "stop", [3])) == 2
    err = capsys.readouterr().err
    assert (
        re.search(r"^error: loss is nan at epoch 0, step 2 \(train.nonfinite=stop\)", err, re.M)
        and "Traceback" not in err
    )


def test_skip_leaves_those_steps_out_and_finishes(out_root, caplog):
    caplog.set_level(logging.INFO)
    assert main.main(nan_args(out_root, "skip", [3, 4, 9], "train.nonfinite=skip", "train.max_nonfinite_skips=2")) == 0
    assert "step skipped (2 in a row" in caplog.text and "step skipped (1 in a row" in caplog.text
    state = load_verified(out_root / "skip" / "latest" / "checkpoints" / "last.pt")
    assert finite(state) and state["loop"]["nonfinite"] == {"consecutive": 0, "total": 3}
    assert state["progress"]["step"] == 19  # skipped steps still consume their batches


def test_too_many_skips_in_a_row_stop_and_keep_the_checkpoint(out_root, capsys):
    args = nan_args(
        out_root,
        "many",
        [6, 7, 8],
        "train.nonfinite=skip",
        "train.max_nonfinite_skips=2",
        "train.checkpoint_every_steps=4",
    )
    assert main.main(args) == 2
    assert "error: non-finite loss in 3 consecutive steps" in capsys.readouterr().err
    newest = CheckpointStore(out_root / "many" / "latest" / "checkpoints").numbered()[0]
    assert newest.name == "epoch0000_batch000004.pt" and finite(load_verified(newest))


def test_nan_weights_are_never_written_over_the_last_good_checkpoint(out_root, capsys):
    args = [
        *fast_overrides(out_root, "poison", epochs=1),
        *NAN,
        "model.args={num_classes: 10, backbone_args: {widths: [8, 16]}, poison_at: 6}",
        "train.nonfinite=skip",
        "train.max_nonfinite_skips=100",
        "train.checkpoint_every_steps=4",
    ]
    assert main.main(args) == 2
    err = capsys.readouterr().err
    assert (
        "error: the weights became NaN/inf by step 8" in err and "the newest, epoch0000_batch000004.pt: --resume" in err
    )
    store = CheckpointStore(out_root / "poison" / "latest" / "checkpoints")
    assert [p.name for p in store.numbered()] == ["epoch0000_batch000004.pt"] and finite(
        load_verified(store.numbered()[0])
    )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_ranks_agree_to_skip_a_step_only_one_of_them_saw_as_nan(tmp_path):
    args = "model.args={num_classes: 10, backbone_args: {widths: [8, 16]}, nan_at: [3], nan_rank: 1}"
    proc = run(
        torchrun(
            2,
            f"experiment.output_root={tmp_path}",
            "experiment.name=ddp",
            "train.epochs=1",
            *NAN,
            args,
            "train.nonfinite=skip",
        ),
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (
        "replicas identical on 2 rank(s)" in proc.stderr and "[rank1]" in proc.stderr and "step skipped" in proc.stderr
    )
    assert load_verified(tmp_path / "ddp" / "latest" / "checkpoints" / "last.pt")["loop"]["nonfinite"]["total"] == 1
