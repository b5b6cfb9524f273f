"""Gradient accumulation equals a K-times larger batch (1 process and 2 DDP processes); clipping bounds the step."""

import subprocess
import sys

import pytest
import torch
from torch import nn

from tests.conftest import ROOT, subprocess_env
from tests.fixtures import accumulate_worker as worker
from utils.amp import Amp
from utils.config.schema import AmpConfig
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts


def run_epoch(model, batches, accumulate=1, lr=0.5, momentum=0.9, **kwargs) -> int:
    """One epoch of the framework's loop (no hooks) over ``batches``; returns the optimizer steps."""
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    parts = Parts(
        model, nn.CrossEntropyLoss(), Amp(AmpConfig(), torch.device("cpu")), optimizer, scheduler, train_loader=batches
    )
    trainer = Trainer(parts, LoopOptions(accumulate=accumulate, **kwargs))
    trainer.fit()
    return trainer.state.step


def chunks(x, y, size):
    return [(x[i : i + size], y[i : i + size]) for i in range(0, len(x), size)]


def assert_same_weights(a: nn.Module, b: nn.Module):
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.allclose(p, q, rtol=1e-5, atol=1e-6), name


def test_k_micro_batches_update_like_one_batch_k_times_larger():
    x, y = worker.make_data()  # 48 samples
    accumulated, reference = worker.make_model(), worker.make_model()
    steps = run_epoch(accumulated, chunks(x, y, 4), accumulate=3)  # 12 micro-batches -> 4 steps
    run_epoch(reference, chunks(x, y, 12))
    assert steps == 4
    assert_same_weights(accumulated, reference)
    assert not torch.allclose(accumulated[0].weight, worker.make_model()[0].weight)


def test_a_shorter_last_group_is_the_mean_of_its_micro_batches():
    x, y = worker.make_data()
    x, y = x[:20], y[:20]  # 5 micro-batches of 4 with K=2: groups of 8, 8, 4
    accumulated, reference = worker.make_model(), worker.make_model()
    steps = run_epoch(accumulated, chunks(x, y, 4), accumulate=2)
    run_epoch(reference, [(x[:8], y[:8]), (x[8:16], y[8:16]), (x[16:], y[16:])])
    assert steps == 3
    assert_same_weights(accumulated, reference)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_accumulation_under_two_process_ddp_syncs_once_per_step(tmp_path):
    out = tmp_path / "ddp.pt"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        str(ROOT / "tests" / "fixtures" / "accumulate_worker.py"),
        str(out),
    ]
    proc = subprocess.run(cmd, env=subprocess_env(), cwd=ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = torch.load(out, weights_only=False)
    assert result["steps"] == worker.STEPS
    assert result["allreduce_calls"] == worker.STEPS  # one bucket, synchronised on the last micro-step only

    x, y = worker.make_data()
    reference = worker.make_model()
    run_epoch(reference, chunks(x, y, worker.WORLD * worker.K * worker.B))  # one batch of W*K*B per step
    for name, value in reference.state_dict().items():
        assert torch.allclose(result["state"][name], value, rtol=1e-5, atol=1e-6), name


def test_clipping_by_norm_and_by_value_bounds_the_sgd_step():
    x, y = worker.make_data()
    batches = [(x[:16] * 50, y[:16])]  # large gradients (float rounding of p - delta is ~1e-8)
    for kwargs, check in (
        ({"clip_grad_norm": 1e-3}, lambda d: torch.sqrt(sum((t**2).sum() for t in d)) <= 1e-3 + 1e-5),
        ({"clip_grad_value": 1e-4}, lambda d: all(t.abs().max() <= 1e-4 + 1e-6 for t in d)),
    ):
        model = worker.make_model()
        before = [p.detach().clone() for p in model.parameters()]
        run_epoch(model, batches, lr=1.0, momentum=0.0, **kwargs)
        deltas = [p.detach() - b for p, b in zip(model.parameters(), before)]
        assert check(deltas), kwargs
        unclipped = worker.make_model()
        run_epoch(unclipped, batches, lr=1.0, momentum=0.0)
        assert not check([p.detach() - b for p, b in zip(unclipped.parameters(), before)])
