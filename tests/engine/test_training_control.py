"""EMA of weights, early stopping, iteration-based length and auto-resume."""

import logging

import pytest
import torch
from torch import nn

import main
from tests.conftest import fast_overrides
from tests.fixtures.metrics_rows import rows
from utils.amp import Amp
from utils.config.load import load_config
from utils.config.schema import AmpConfig
from utils.data import build_dataset, build_eval_loader
from utils.engine.evaluate import evaluate
from utils.engine.validator import BestTracker
from utils.errors import ConfigError
from utils.metrics import build_metric
from utils.model.build import build_network
from utils.model.criterion import build_criterion
from utils.optim.ema import ModelEma


def test_ema_follows_the_documented_formula():
    model = nn.Linear(3, 2)
    model.weight.requires_grad_(False)  # a frozen tensor: its average stays equal to it
    ema = ModelEma(model, decay=0.5, warmup=True)
    expected = model.bias.detach().clone()
    for t, value in enumerate([1.0, -2.0, 4.0, 3.0]):
        with torch.no_grad():
            model.bias.fill_(value)
        d = min(0.5, (1 + t) / (10 + t))  # 0.1, 2/11, 0.25, 4/13
        expected = d * expected + (1 - d) * value
        ema.update(model)
    assert torch.allclose(ema.module.bias, expected, rtol=1e-6)
    assert torch.equal(ema.module.weight, model.weight) and ema.updates == 4

    plain = ModelEma(model, decay=0.9, warmup=False)
    with torch.no_grad():
        model.bias.fill_(10.0)
    plain.update(model)
    assert torch.allclose(plain.module.bias, torch.full((2,), 0.9 * 3.0 + 0.1 * 10.0))


def test_eval_with_ema_monitors_checkpoints_and_tests_the_ema_weights(out_root, capsys):
    args = fast_overrides(out_root, "ema", epochs=3) + [
        "train.ema={decay: 0.9}",
        "eval.use_ema=true",
        "eval.monitor=loss",
        "eval.monitor_mode=min",
    ]
    assert main.main(args) == 0
    capsys.readouterr()
    run = out_root / "ema" / "latest"
    val = rows(run, "val")
    assert all("ema_loss" in r and "loss" in r for r in val)
    best_epoch = min(val, key=lambda r: r["ema_loss"])["epoch"]
    best = torch.load(run / "checkpoints" / "best.pt", weights_only=False)
    assert best["progress"]["epoch"] == best_epoch + 1 and best["loop"]["validator"]["metric"] == "ema_loss"
    assert best["ema"]["updates"] == best["progress"]["step"] > 0
    assert not torch.equal(best["ema"]["weights"]["head.2.weight"], best["model"]["head.2.weight"])

    cfg = load_config(None, args)
    device = torch.device("cpu")
    loader = build_eval_loader(build_dataset(cfg.data, "test"), cfg.data, 0, 1)

    def test_loss(weights):
        model = build_network(cfg.model)
        model.load_state_dict(weights)
        return evaluate(
            model,
            loader,
            build_criterion(cfg.loss),
            build_metric("classification"),
            Amp(AmpConfig(), device),
            device,
            show_progress=False,
        )["loss"]

    tested = rows(run, "test")[-1]["loss"]
    assert tested == pytest.approx(test_loss(best["ema"]["weights"]), rel=1e-9)
    assert tested != pytest.approx(test_loss(best["model"]), rel=1e-6)
    # --mode test on best.pt evaluates the same (EMA) weights
    assert main.main(["--mode", "test", "--checkpoint", str(run / "checkpoints" / "best.pt")]) == 0
    assert rows(run.parent / "test_001", "test")[-1]["loss"] == pytest.approx(tested, rel=1e-9)


def test_best_tracker_counts_evaluations_without_improvement():
    tracker = BestTracker("top1", "max", patience=3)
    stops = []
    for epoch, value in enumerate([0.5, 0.6, 0.6, 0.55, 0.7, 0.6, 0.7, 0.69]):
        tracker.update(value, epoch)
        stops.append(tracker.should_stop)
    assert stops == [False] * 7 + [True] and tracker.epoch == 4
    low = BestTracker("loss", "min", patience=None)
    assert [low.update(v, i) for i, v in enumerate([3.0, 2.0, 2.5, 1.0])] == [True, True, False, True]
    assert not low.should_stop
    nan = BestTracker("loss", "min", patience=2)  # a NaN value is never the best: later numbers still win
    assert [nan.update(v, i) for i, v in enumerate([float("nan"), 2.0, float("nan"), 1.0])] == [
        False,
        True,
        False,
        True,
    ]
    assert nan.value == 1.0 and nan.epoch == 3 and nan.evals_since_best == 0


def test_early_stopping_stops_at_the_right_epoch(out_root, caplog):
    caplog.set_level(logging.INFO)
    # lr 0 and frozen BatchNorm: the network never changes, so epoch 0 stays the best
    args = fast_overrides(out_root, "stop", epochs=10) + [
        "optim.lr=0.0",
        "model.freeze_bn=true",
        "train.patience=2",
        "eval.every=2",
    ]
    assert main.main(args) == 0
    run = out_root / "stop" / "latest"
    assert [r["epoch"] for r in rows(run, "val")] == [1, 3, 5]  # best at 1, then 2 evaluations without improvement
    assert torch.load(run / "checkpoints" / "last.pt", weights_only=False)["progress"]["epoch"] == 6
    assert "early stop after epoch 5" in caplog.text
    # resuming a run that stopped early trains no further
    assert main.main([*args, "train.auto_resume=true"]) == 0
    assert [r["epoch"] for r in rows(run, "val")] == [1, 3, 5]


def test_iterations_override_epochs_and_run_exactly_that_many_steps(out_root, caplog):
    caplog.set_level(logging.INFO)
    # 1257 training digits, batch 64, drop_last: 19 micro-batches = 10 optimizer steps per epoch with K=2
    args = fast_overrides(out_root, "iters", epochs=50) + [
        "train.iterations=25",
        "train.accumulate=2",
        "schedule.warmup_epochs=0",
    ]
    assert main.main(args) == 0
    state = torch.load(out_root / "iters" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    # step 25 is the 5th step of epoch 2: the last checkpoint records where the run really stopped
    assert state["progress"] == {"epoch": 2, "batch": 10, "step": 25}
    assert state["scheduler"]["last_epoch"] == 25
    assert state["optimizer"]["param_groups"][0]["lr"] == pytest.approx(0.0, abs=1e-12)  # the cosine ended on step 25
    assert [r["epoch"] for r in rows(out_root / "iters" / "latest", "val")] == [0, 1, 2]
    assert "train.iterations=25 optimizer steps (3 epochs of 10 steps" in caplog.text


def test_auto_resume_restores_the_ema_and_continues(out_root, caplog):
    caplog.set_level(logging.INFO)
    args = fast_overrides(out_root, "auto", epochs=2) + [
        "train.ema={decay: 0.9, warmup: false}",
        "train.auto_resume=true",
    ]
    assert main.main(args) == 0
    first = torch.load(out_root / "auto" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert main.main([*args, "train.epochs=3"]) == 0
    second = torch.load(out_root / "auto" / "latest" / "checkpoints" / "last.pt", weights_only=False)
    assert "resumed from" in caplog.text
    assert (
        second["progress"]["epoch"] == 3
        and second["ema"]["updates"] == second["progress"]["step"] > first["ema"]["updates"]
    )


def test_bad_training_control_values_are_config_errors():
    for override, key in (
        ("eval.use_ema=true", "eval.use_ema"),
        ("train.ema={decay: 1.5}", "train.ema"),
        ("train.ema={decy: 0.9}", "train.ema"),
        ("optim.layer_decay=0", "optim.layer_decay"),
        ("train.iterations=0", "train.iterations"),
        ("train.patience=0", "train.patience"),
    ):
        with pytest.raises(ConfigError, match=key):
            load_config(None, [override])
