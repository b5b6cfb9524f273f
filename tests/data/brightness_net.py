"""A test-only network that classifies an image by its mean brightness, without learning.

Class k of K is the brightness k / (K - 1) (black, grey, white for K = 3), so its accuracy
says only whether the data's labels follow one class list. Loaded with
``custom_imports=[tests.data.brightness_net]``.
"""

from __future__ import annotations

import torch
from torch import nn

from utils.registry import NETWORKS


@NETWORKS.register("brightness_classifier")
class BrightnessClassifier(nn.Module):
    def __init__(self, num_classes: int = 3) -> None:
        super().__init__()
        self.register_buffer("centers", torch.linspace(0.0, 1.0, num_classes))
        self.unused = nn.Parameter(torch.zeros(()))  # the optimizer needs a parameter; its gradient is zero

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        brightness = x.mean(dim=(1, 2, 3))[:, None]
        return -100.0 * (brightness - self.centers).abs() + 0.0 * self.unused
