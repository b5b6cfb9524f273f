"""Parameter and MAC counts are real figures, not a silent NaN."""

from __future__ import annotations

import logging

import pytest
import torch
from torchvision.models import resnet18

from utils.model.summary import count_flops, count_parameters, log_summary


def test_torchvision_resnet18_at_224_has_its_published_size_and_macs():
    model = resnet18(weights=None)
    assert count_parameters(model) == (11_689_512, 11_689_512)  # 11.69M
    assert count_flops(model, [3, 224, 224]) == pytest.approx(1.82e9, rel=0.005)  # 1.82 GMACs
    # thop's buffers stay off the model
    assert all(not name.endswith(("total_ops", "total_params")) for name, _ in model.named_buffers())


def test_a_model_thop_cannot_trace_is_logged_as_nan(caplog):
    class Odd(torch.nn.Module):
        def forward(self, x):
            raise RuntimeError("cannot run on zeros")

    caplog.set_level(logging.INFO)
    log_summary(Odd(), "odd", [1, 8, 8], count_macs=True)
    assert "could not count FLOPs" in caplog.text and "nan GMACs" in caplog.text
