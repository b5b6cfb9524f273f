"""A classifier that raises on one rank at a chosen training step.

Distributed tests load it into ``main.py`` with ``custom_imports=[tests.distributed.faulty_net]``
to check that one failing rank ends the whole job instead of hanging it.
"""

from __future__ import annotations

import threading

import torch

from network.classifier import Classifier
from utils.distributed.ops import get_rank
from utils.registry import NETWORKS


@NETWORKS.register("faulty_classifier")
class FaultyClassifier(Classifier):
    """``Classifier`` whose forward on rank ``fail_rank`` raises at training call ``fail_at``.

    ``linger`` first starts a non-daemon thread that never ends, as a loader
    thread blocked on a full queue would: a normal interpreter exit waits for it.
    """

    def __init__(self, num_classes: int = 10, fail_rank: int = 1, fail_at: int = 3, linger: bool = False, **kwargs) -> None:
        super().__init__(num_classes, **kwargs)
        self.fail_rank = fail_rank
        self.fail_at = fail_at
        self.linger = linger
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.calls += 1
            if get_rank() == self.fail_rank and self.calls == self.fail_at:
                if self.linger:
                    threading.Thread(target=threading.Event().wait, name="lingering", daemon=False).start()
                raise RuntimeError(f"injected failure on rank {self.fail_rank} at step {self.calls}")
        return super().forward(x)
