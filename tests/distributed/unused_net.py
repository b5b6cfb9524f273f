"""A classifier with a layer its forward never uses: DDP's unused-parameter error.

Tests load it into ``main.py`` with ``custom_imports=[tests.distributed.unused_net]``.
"""

from __future__ import annotations

from torch import nn

from network.classifier import Classifier
from utils.registry import NETWORKS


@NETWORKS.register("spare_layer_classifier")
class SpareLayerClassifier(Classifier):
    """``Classifier`` plus ``spare``, a linear layer no output depends on (as a half-finished branch would be)."""

    def __init__(self, num_classes: int = 10, **kwargs) -> None:
        super().__init__(num_classes, **kwargs)
        self.spare = nn.Linear(4, 4)
