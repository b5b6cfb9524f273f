"""Every changed setting on resume is applied, refused or inert, never dropped (``utils/checkpoint/guard.py``).

One 2-epoch digits run is trained once; each case resumes a copy of it with a changed setting
and reads what the resumed run's checkpoints hold.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from torch import nn

import main
from tests.apps.conftest import make_digit_folder
from tests.conftest import fast_overrides
from tests.fixtures.metrics_rows import rows
from utils.checkpoint.optimizer_state import restore_optimizer
from utils.checkpoint.records import read_record, record_path
from utils.checkpoint.store import CheckpointStore
from utils.config.resume import RULES, field_rules
from utils.config.schema import Config
from utils.engine.validator import Validator
from utils.optim.optimizers import param_groups


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("resume_rules")
    assert main.main([*fast_overrides(out, "base", epochs=2), "threads=1", "train.keep_checkpoints=3"]) == 0
    return out


def resumed(trained: Path, tmp_path: Path, *extra: str, code: int = 0) -> Path:
    """A copy of the trained (finished) run, named to continue it, resumed with ``extra``; the copy's run folder."""
    shutil.copytree(trained / "base", tmp_path / "base", symlinks=True)
    run = tmp_path / "base" / "run_001"
    overrides = [*fast_overrides(tmp_path, "base", epochs=3), "threads=1", "train.keep_checkpoints=3"]
    assert main.main([*overrides, "--resume", str(run), *extra]) == code
    return run


def checkpoint(run: Path, epochs: int) -> dict:
    """The checkpoint after ``epochs`` epochs of 19 batches: the end of epoch ``epochs - 1``."""
    return torch.load(run / "checkpoints" / f"epoch{epochs - 1:04d}_batch000019.pt", weights_only=False)


def test_every_config_key_has_a_resume_rule():
    rules = field_rules(Config)
    assert all(rule in RULES for rule in rules.values()), [key for key, rule in rules.items() if rule not in RULES]
    assert rules["optim.lr"] == "apply" and rules["model.args"] == "match" and rules["train.log_every"] == "inert"
    assert "optim" not in rules and "train.ema" in rules  # sections are recursed, their fields are the keys


def test_changed_lr_weight_decay_and_betas_take_effect(trained, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    run = resumed(trained, tmp_path, "optim.lr=0.0005", "optim.weight_decay=0.01", "optim.betas=[0.8, 0.99]")
    assert "changed on resume: optim.lr 0.003 -> 0.0005" in caplog.text
    assert "changed on resume: optim.betas [0.9, 0.999] -> [0.8, 0.99]" in caplog.text
    groups = checkpoint(run, 3)["optimizer"]["param_groups"]
    assert {g["initial_lr"] for g in groups} == {0.0005}
    assert {g["weight_decay"] for g in groups} == {0.0, 0.01}  # norms and biases never decay
    assert {tuple(g["betas"]) for g in groups} == {(0.8, 0.99)}
    assert checkpoint(run, 3)["scheduler"]["base_lrs"] == [0.0005] * len(groups)


def test_lr_zero_leaves_the_weights_where_they_were(trained, tmp_path):
    run = resumed(trained, tmp_path, "optim.lr=0")
    before, after = checkpoint(run, 2)["model"], checkpoint(run, 3)["model"]
    moved = [
        k for k, v in before.items() if "running" not in k and "num_batches" not in k and not torch.equal(v, after[k])
    ]
    assert not moved, moved


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_another_optimizer_type_is_refused(trained, tmp_path, capsys, name):
    resumed(trained, tmp_path, f"optim.name={name}", code=2)
    err = capsys.readouterr().err
    assert (
        f"error: cannot resume from '{tmp_path}" in err
        and f"optim.name changed adamw -> {name}" in err
        and "--reset-optimizer" in err
    )
    assert "Traceback" not in err


def test_reset_optimizer_starts_another_type_afresh(trained, tmp_path, caplog):
    run = resumed(trained, tmp_path, "optim.name=sgd", "--reset-optimizer")
    state = checkpoint(run, 3)["optimizer"]["state"]
    assert state and all(set(s) == {"momentum_buffer"} for s in state.values())
    assert "--reset-optimizer: the optimizer state" in caplog.text


def test_new_param_groups_keep_every_moment(trained, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    run = resumed(trained, tmp_path, "optim.param_groups=[{pattern: 'head.*', lr_mult: 0.1}]", "optim.layer_decay=0.5")
    assert "optimizer state moved by parameter name into the new grouping" in caplog.text
    groups = checkpoint(run, 3)["optimizer"]["param_groups"]
    assert any(g["group"].startswith("head.*") and g["lr_scale"] == pytest.approx(0.1) for g in groups)


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))


def test_optimizer_state_moves_by_name_into_another_grouping():
    model = _net()
    first = torch.optim.AdamW(param_groups(model, 0.1, 1e-2))
    model(torch.randn(5, 3)).sum().backward()
    first.step()
    saved = first.state_dict()
    second = torch.optim.AdamW(param_groups(model, 0.1, 1e-3, specs=[{"pattern": "2.*", "lr_mult": 0.5}]))
    restore_optimizer(second, saved, "<memory>")
    for param in model.parameters():
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(second.state[param][key], first.state[param][key])
    # the new config's values, not the saved ones
    assert sorted(g["lr"] for g in second.param_groups) == [
        5e-4,
        5e-4,
        1e-3,
        1e-3,
    ]


def test_a_changed_monitor_is_rebuilt_from_the_recorded_validations(trained, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    run = resumed(trained, tmp_path, "eval.monitor=loss")
    assert "best rebuilt from 2 recorded validation(s)" in caplog.text
    val = rows(run, "val")
    assert [r["epoch"] for r in val] == [0, 1, 2]
    best_epoch = min(val, key=lambda r: r["loss"])["epoch"]
    store = CheckpointStore(run / "checkpoints")
    best = [p for p in store.numbered() if (p.parent / "best.pt").samefile(p)]
    assert len(best) == 1 and read_record(best[0]).epoch == best_epoch


def test_replay_never_compares_two_metrics():
    validator = Validator(None, monitor="loss", mode="min")
    validator.load_state_dict(
        {"metric": "top1", "mode": "max", "value": 0.9, "epoch": 1, "evals_since_best": 0, "pending": None}
    )
    assert validator.retracked == "top1 (max)" and validator.tracker.value is None
    validator.retrack([{"epoch": 0, "loss": 1.0, "top1": 0.5}, {"epoch": 1, "loss": 2.0, "top1": 0.9}])
    assert (validator.tracker.value, validator.tracker.epoch, validator.tracker.evals_since_best) == (1.0, 0, 1)
    assert not validator.tracker.update(1.5, 2)  # a worse loss never becomes best


def test_training_on_other_data_is_refused(tmp_path, capsys):
    first = make_digit_folder(tmp_path / "a")
    other = make_digit_folder(tmp_path / "b", {"train": 24, "val": 12, "test": 2})
    args = [
        f"experiment.output_root={tmp_path / 'out'}",
        "experiment.name=folder",
        "threads=1",
        "data.name=image_folder",
        "data.args={channels: 1}",
        "data.batch_size=8",
        "model.input_size=[1, 8, 8]",
        "model.args={backbone: small_cnn, num_classes: 3, backbone_args: {in_channels: 1, widths: [8]}}",
        "train.epochs=1",
    ]
    assert main.main([*args, f"data.root={first}"]) == 0
    moved = tmp_path / "moved"
    shutil.move(str(first), moved)  # the same data elsewhere resumes
    run = str(tmp_path / "out" / "folder" / "run_001")  # finished: continued when named
    assert main.main([*args, f"data.root={moved}", "train.epochs=2", "--resume", run]) == 0
    capsys.readouterr()
    assert main.main([*args, f"data.root={other}", "train.epochs=3", "--resume", run]) == 2
    err = capsys.readouterr().err
    assert "training samples: 30 -> 24" in err and "--resume-force" in err


def test_a_checkpoint_of_the_previous_version_resumes_positionally(trained, tmp_path, capsys):
    """0.3.0 wrote no parameter names and no data identity: its optimizer state loads by position, as then. As
    older versions did, it names the best file in the checkpointer's state and as the validation record's own key."""
    shutil.copytree(trained / "base", tmp_path / "base", symlinks=True)
    store = CheckpointStore(tmp_path / "base" / "run_001" / "checkpoints")
    newest = store.numbered()[0]
    data = torch.load(newest, weights_only=False)
    for key in ("param_layout", "data"):
        data.pop(key)
    for group in data["optimizer"]["param_groups"]:
        group.pop("names")
    store.best = data["loop"]["validator"].pop("file")
    data["loop"]["checkpointer"] = {"best": store.best}
    store.save(data, data["progress"]["epoch"], data["progress"]["batch"])
    for path in store.numbered():
        if record_path(path).is_file():
            record = json.loads(record_path(path).read_text())
            record["best"] = record["validator"].pop("file")
            record_path(path).write_text(json.dumps(record))
    assert (
        main.main(
            [
                *fast_overrides(tmp_path, "base", epochs=3),
                "threads=1",
                "train.keep_checkpoints=3",
                "--resume",
                str(tmp_path / "base" / "run_001"),
            ]
        )
        == 0
    )
    assert "test: top1=" in capsys.readouterr().out
    resumed = torch.load(store.numbered()[0], weights_only=False)
    assert resumed["progress"]["epoch"] == 3 and all("names" in g for g in resumed["optimizer"]["param_groups"])
    assert "checkpointer" not in resumed["loop"] and resumed["loop"]["validator"]["file"] is not None


def test_another_accumulation_keeps_the_schedule_to_the_last_epoch(trained, tmp_path, caplog):
    """Epochs of 19 steps, resumed with train.accumulate=2 (10 steps each): the schedule spans 38 + 10
    steps; counted as 3 x 10 it was over before the resumed epoch began, which then trained at LR 0."""
    caplog.set_level(logging.INFO)
    run = resumed(trained, tmp_path, "train.accumulate=2", "train.checkpoint_every_steps=4")
    assert "the schedule spans 48 steps (not 3 x 10)" in caplog.text
    middle = torch.load(run / "checkpoints" / "epoch0002_batch000004.pt", weights_only=False)
    assert middle["progress"]["step"] == 40 and min(g["lr"] for g in middle["optimizer"]["param_groups"]) > 1e-4


def test_a_refused_resume_keeps_the_runs_config_and_logs_no_change(trained, tmp_path, capsys, caplog):
    run = resumed(trained, tmp_path, "dist.mode=fsdp", code=2)
    err = capsys.readouterr().err
    assert "it is a single-file checkpoint, but this run has dist.mode=fsdp" in err
    assert "epochs: 2" in (run / "config.yaml").read_text() and "mode: fsdp" not in (run / "config.yaml").read_text()
    assert "changed on resume" not in caplog.text


def test_a_changed_mapping_names_its_keys_only(trained, tmp_path, capsys):
    resumed(trained, tmp_path, "data.args={val_fraction: 0.3}", code=2)
    err = capsys.readouterr().err
    assert "data.args.val_fraction: None -> 0.3" in err and "data.args: {}" not in err


@pytest.mark.parametrize("older", ["no order", "no data identity"])  # before the index shuffle; 0.3.0 and older
def test_a_checkpoint_of_epochs_drawn_another_way_restarts_its_epoch(trained, tmp_path, caplog, older):
    """A checkpoint written inside an epoch by a version that drew its epochs by torch.randperm (no "order" in its
    data identity, or no identity at all) cannot continue that epoch sample for sample: the epoch restarts, and the
    log says why."""
    caplog.set_level(logging.INFO)
    shutil.copytree(trained / "base", tmp_path / "base", symlinks=True)
    store = CheckpointStore(tmp_path / "base" / "run_001" / "checkpoints")
    data = torch.load(store.numbered()[0], weights_only=False)
    assert data["data"].pop("order") == "index shuffle 1"
    if older == "no data identity":
        data.pop("data")
    data["progress"]["batch"] = 6  # as if written 6 batches into epoch 2
    store.save(data, data["progress"]["epoch"], 6)
    overrides = [*fast_overrides(tmp_path, "base", epochs=3), "threads=1", "train.keep_checkpoints=3"]
    assert main.main([*overrides, "--resume", str(tmp_path / "base" / "run_001")]) == 0
    assert "drew its epochs as torch.randperm(seed + epoch); this version draws them as index shuffle 1" in caplog.text
    assert "the checkpoint's data order does not hold (above): epoch 2 restarts from its first batch" in caplog.text
    assert f"training state restored: epoch 2, step {data['progress']['step']}" in caplog.text
    assert checkpoint(tmp_path / "base" / "run_001", 3)["data"]["order"] == "index shuffle 1"
