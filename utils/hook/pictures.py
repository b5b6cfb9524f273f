"""A base for hooks that draw once per evaluation: after each validation and after the test."""

from __future__ import annotations

from typing import Any, Dict

from utils.hook import Hook


class EvaluationPictures(Hook):
    """Collects in ``after_eval_batch``; ``write(trainer, split)`` runs after each validation
    (``val``) and after the test (``test``), on every rank."""

    def after_validation(self, trainer: Any, metrics: Dict[str, float]) -> None:
        self.write(trainer, "val")

    def after_test(self, trainer: Any, metrics: Dict[str, float]) -> None:
        self.write(trainer, "test")

    def write(self, trainer: Any, split: str) -> None:
        """Draw what ``split``'s evaluation collected, and forget it."""
        raise NotImplementedError
