"""The memory benchmark's count: each saved storage once, parameters apart, by the module that saved it."""

from __future__ import annotations

import torch
from torch import nn

from benchmarks.bench_memory import SavedCounter


class _Square(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * x  # saves x twice: one storage


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(100, 50, bias=False)  # saves its input (its weight is a parameter: not counted)
        self.square = _Square()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.square(self.fc(x))


class _Run:
    """What SavedCounter.count calls: ``loss(x, y)``."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model

    def loss(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.mse_loss(self.model(x), y)  # saves the prediction and the target


def test_saved_bytes_count_each_storage_once_by_module():
    net = _Net()
    x, y = torch.randn(8, 100, requires_grad=True), torch.randn(8, 50)
    counted = SavedCounter(net).count(_Run(net), x, y)
    assert counted == {"fc": 8 * 100 * 4, "square": 8 * 50 * 4, "loss": 2 * 8 * 50 * 4}
