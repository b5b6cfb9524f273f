"""The training loop reads no tensor value between sync points (log steps, checkpoints, the epoch's end).

Counted by ``utils/host_reads.py``, as ``benchmarks/bench_host_reads.py`` counts: every ``item``/``tolist``/``bool(t)``/...
whose caller is a file of the project.
"""

from __future__ import annotations

import collections
import re

import pytest
import torch
from torch import nn

from utils.amp import Amp
from utils.config.schema import AmpConfig, OptimConfig
from utils.engine.trainer import Trainer
from utils.engine.trainer_types import LoopOptions, Parts
from utils.errors import NonFiniteError
from utils.hook.progress import ProgressHook
from utils.host_reads import counting, totals
from utils.optim.optimizers import build_optimizer

STEPS, LOG_EVERY = 25, 10


class NanAt(nn.Module):
    """A tiny classifier whose output is NaN at the given training calls (0-based)."""

    def __init__(self, nan_at=()):
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Sequential(
            nn.Conv2d(1, 4, 3, padding=1),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(4, 10),
        )
        self.nan_at, self.calls = set(nan_at), 0

    def forward(self, x):
        out = self.net(x)
        self.calls += 1
        return out * float("nan") if self.calls - 1 in self.nan_at else out


def trainer_for(tmp_path, impl="auto", amp=None, nan_at=(), nonfinite="stop", ema=None):
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 1, 8, 8, generator=g), torch.randint(0, 10, (8,), generator=g)) for _ in range(STEPS)]
    model = NanAt(nan_at)
    optimizer = build_optimizer(model, OptimConfig(impl=impl))
    amp = Amp(amp or AmpConfig(), torch.device("cpu"))
    model, optimizer = amp.initialize(model, optimizer)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda it: 1.0)
    parts = Parts(model, nn.CrossEntropyLoss(), amp, optimizer, scheduler, train_loader=batches, ema=ema)
    return Trainer(
        parts,
        LoopOptions(log_every=LOG_EVERY, nonfinite=nonfinite, max_nonfinite_skips=100),
        hooks=[ProgressHook(LOG_EVERY)],
    )


def reads_of(trainer) -> int:
    counts = collections.Counter()
    with counting(counts):
        try:
            trainer.fit()
        finally:
            trainer.close()
    return totals(counts)["read"]


@pytest.mark.parametrize(
    "impl, amp, nonfinite",
    [
        ("auto", AmpConfig(), "stop"),  # the defaults: O0, fused AdamW
        ("auto", AmpConfig(opt_level="O1"), "stop"),  # bf16 autocast on the CPU
        ("auto", AmpConfig(), "skip"),  # the skip decision stays on the device
        # fp16 loss scaling, fused: no read
        (
            "auto",
            AmpConfig(opt_level="O1", dtype="float16", loss_scale=128.0),
            "stop",
        ),
    ],
)
def test_one_read_per_log_step_and_one_at_the_epoch_end(tmp_path, impl, amp, nonfinite):
    assert reads_of(trainer_for(tmp_path, impl, amp, nonfinite=nonfinite)) == STEPS // LOG_EVERY + 1


def test_an_optimizer_without_found_inf_reads_once_per_step_under_skip(tmp_path):
    assert reads_of(trainer_for(tmp_path, "loop", nonfinite="skip")) == STEPS + STEPS // LOG_EVERY + 1


def test_stop_names_the_step_and_the_checked_range(tmp_path):
    with pytest.raises(
        NonFiniteError,
        match=re.escape("loss is nan at epoch 0, step 3 (train.nonfinite=stop); steps 0..9 were checked at step 10"),
    ):
        trainer_for(tmp_path, nan_at=[3]).fit()


@pytest.mark.parametrize("impl", ["fused", "loop"])
def test_a_step_skipped_on_the_device_or_the_host_leaves_weights_schedule_and_ema_alike(tmp_path, impl):
    from utils.optim.ema import ModelEma

    runs = {}
    for nan_at in ([4, 5], []):
        model_for_ema = NanAt()
        trainer = trainer_for(tmp_path, impl, nan_at=nan_at, nonfinite="skip", ema=ModelEma(model_for_ema, decay=0.9))
        trainer.parts.ema.module.load_state_dict(trainer.parts.model.state_dict())
        trainer.fit()
        runs[bool(nan_at)] = trainer
    skipped, clean = runs[True], runs[False]
    assert skipped.nonfinite.total == 2 and skipped.state.train_metrics["steps"] == STEPS - 2
    assert skipped.parts.scheduler.last_epoch == STEPS - 2 and clean.parts.scheduler.last_epoch == STEPS
    assert skipped.parts.ema.updates == STEPS - 2
    assert all(torch.isfinite(p).all() for p in skipped.parts.model.parameters())
    assert all(torch.isfinite(v).all() for v in skipped.parts.ema.module.state_dict().values() if v.is_floating_point())
