"""``train.compile``: the compiled network trains like the eager one (CPU, inductor, gcc).

Compiling is slow on a CPU, so the runs are tiny and shared between assertions.
Tolerances: inductor fuses and reorders floating-point reductions, so compiled
losses equal eager ones within rtol 1e-4 / atol 1e-5 in fp32 (measured: ~1e-7),
and within rtol 1e-2 in bf16 (O1, O2: 8 bits of mantissa, and inductor keeps
fused intermediates in fp32 where eager rounds each op). Weights follow the
losses on random inputs; on digits, whose constant background makes many
BatchNorm outputs exactly 0 in eager and +-1e-8 compiled, a ReLU tie can pass or
block a gradient, so weights after a few steps differ by up to ~5e-5 and
epoch-long runs are compared at atol 1e-3 and their losses at rel 1e-3 .. 1e-2.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import main
from tests.conftest import fast_overrides
from tests.fixtures.dist_utils import run, torchrun
from tests.fixtures.metrics_rows import rows
from utils.amp import Amp
from utils.checkpoint.store import load_verified
from utils.config.rules import COMPILE_DEFAULTS
from utils.config.schema import AmpConfig, OptimConfig
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts
from utils.model.compile import compile_model
from utils.optim.optimizers import build_optimizer
from utils.registry import NETWORKS

FP32_TOL = {"rtol": 1e-4, "atol": 1e-5}
BF16_TOL = {"rtol": 1e-2, "atol": 1e-3}
# eval batches of 60 divide the val (180) and test (360) splits: one eval graph, no recompiles;
# a constant LR: runs of 1, 2 and 3 epochs follow the same schedule
FAST = [
    "data.eval_batch_size=60",
    "threads=1",
    "schedule.name=constant",
    "schedule.warmup_epochs=0",
    "optim.name=sgd",
    "optim.lr=0.01",
]


class Losses:
    """Records every step's loss (a test may read per step)."""

    def __init__(self):
        self.values = []

    def after_step(self, trainer):
        self.values.append(trainer.state.loss.item())


def losses_of(compiled: bool, level: str, grad_checkpointing: bool, steps: int = 3):
    torch.manual_seed(0)
    model = NETWORKS.build("classifier", num_classes=10, backbone="small_cnn", backbone_args={"widths": [4, 8]})
    model.set_grad_checkpointing(grad_checkpointing)
    # Adam would amplify bf16 rounding in tiny gradients
    optimizer = build_optimizer(model, OptimConfig(name="sgd", lr=1e-2))
    amp = Amp(AmpConfig(opt_level=level, dtype="bfloat16"), torch.device("cpu"))
    model, optimizer = amp.initialize(model, optimizer)
    compile_model(model, dict(COMPILE_DEFAULTS) if compiled else None)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)) for _ in range(steps)]
    recorder = Losses()
    parts = Parts(
        model,
        nn.CrossEntropyLoss(),
        amp,
        optimizer,
        torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0),
        train_loader=batches,
    )
    Trainer(parts, LoopOptions(), hooks=[recorder]).fit()
    return recorder.values, model


@pytest.mark.slow
@pytest.mark.parametrize(
    "level, grad_checkpointing, tol", [("O0", False, FP32_TOL), ("O1", True, BF16_TOL), ("O2", False, BF16_TOL)]
)
def test_compiled_losses_equal_eager_over_a_few_steps(level, grad_checkpointing, tol):
    compiled, model = losses_of(True, level, grad_checkpointing)
    eager, reference = losses_of(False, level, grad_checkpointing)
    assert getattr(model, "_compiled_call_impl", None) is not None  # compiled in place
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), **tol)
    # weights, and BatchNorm statistics updated once per step also where checkpointed stages are recomputed
    for (name, a), b in zip(model.state_dict().items(), reference.state_dict().values()):
        torch.testing.assert_close(a.float(), b.float(), **tol, msg=name)


def test_a_mode_it_does_not_know_is_refused_by_name(out_root, capsys):  # dist.mode=dp: tests/cli/test_bad_input.py
    assert main.main([*fast_overrides(out_root, "mode", epochs=1), "train.compile={mode: fastest}"]) == 2
    assert "config key 'train.compile' must be" in capsys.readouterr().err


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """An eager and a compiled epoch; the compiled run resumed eagerly, then compiled again."""
    root = tmp_path_factory.mktemp("compile")
    out = {}
    for name, extra in (("eager", []), ("compiled", ["train.compile=true"])):
        assert main.main([*fast_overrides(root, name, epochs=1), *FAST, *extra]) == 0
        out[name] = load_verified(root / name / "latest" / "checkpoints" / "last.pt")
    base = [*fast_overrides(root, "compiled", epochs=2), *FAST]
    finished = str(root / "compiled" / "run_001")  # continued when named
    assert main.main(["--resume", finished, *base]) == 0  # compiled checkpoint, eager run
    out["then_eager"] = load_verified(root / "compiled" / "latest" / "checkpoints" / "last.pt")
    # and back
    assert (
        main.main(["--resume", finished, *fast_overrides(root, "compiled", epochs=3), *FAST, "train.compile=true"]) == 0
    )
    out["then_compiled"] = load_verified(root / "compiled" / "latest" / "checkpoints" / "last.pt")
    assert main.main([*fast_overrides(root, "eager3", epochs=3), *FAST]) == 0
    out["eager3"] = load_verified(root / "eager3" / "latest" / "checkpoints" / "last.pt")
    out["metrics"] = {name: rows(root / name / "latest") for name in ("eager", "eager3", "compiled")}
    return out


@pytest.mark.slow
def test_a_compiled_epoch_trains_like_an_eager_one(runs):
    assert list(runs["compiled"]["model"]) == list(runs["eager"]["model"])  # no _orig_mod. prefix
    assert not any("_orig_mod" in key for key in runs["compiled"]["model"])
    for name, value in runs["eager"]["model"].items():
        torch.testing.assert_close(runs["compiled"]["model"][name], value, rtol=1e-3, atol=1e-3, msg=name)
    first_val = {name: runs["metrics"][name][0]["loss"] for name in ("eager", "compiled")}
    assert first_val["compiled"] == pytest.approx(first_val["eager"], rel=1e-3)


@pytest.mark.slow
def test_a_compiled_run_resumes_into_an_eager_one_and_back(runs):
    assert runs["then_eager"]["progress"]["epoch"] == 2 and runs["then_compiled"]["progress"]["epoch"] == 3
    assert runs["then_compiled"]["progress"]["step"] == runs["eager3"]["progress"]["step"]
    tests = {
        name: [m for m in runs["metrics"][name] if m["split"] == "test"][-1]["loss"] for name in ("eager3", "compiled")
    }
    assert tests["compiled"] == pytest.approx(tests["eager3"], rel=1e-2)


@pytest.mark.slow
@pytest.mark.timeout(420)
def test_compiled_under_two_rank_ddp_trains_like_eager_over_a_few_steps(tmp_path):
    weights, losses = {}, {}
    for name, extra in (("eager", []), ("compiled", ["train.compile=true"])):
        settings = [
            f"experiment.output_root={tmp_path}",
            f"experiment.name={name}",
            "train.iterations=4",
            "model.args.backbone_args={widths: [8, 16]}",
            *FAST,
        ]
        # 30 divides each rank's slices
        proc = run(torchrun(2, *settings, "data.eval_batch_size=30", *extra), timeout=360)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "replicas identical on 2 rank(s)" in proc.stderr
        weights[name] = load_verified(tmp_path / name / "latest" / "checkpoints" / "last.pt")["model"]
        losses[name] = float(re.search(r"epoch 0 train: loss=([0-9.]+)", proc.stderr).group(1))
    assert losses["compiled"] == pytest.approx(losses["eager"], rel=FP32_TOL["rtol"])
    for name, value in weights["eager"].items():
        # ReLU ties (see the top)
        torch.testing.assert_close(weights["compiled"][name], value, rtol=1e-3, atol=1e-4, msg=name)
