"""Classification: the confusion matrix of each validation and of the test, as a picture in TensorBoard."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import torch

from utils.config.arguments import EvalSplits
from utils.distributed.ops import all_reduce_sums
from utils.hook import EvalBatch
from utils.hook.pictures import EvaluationPictures
from utils.metrics.base import target_labels
from utils.registry import HOOKS
from utils.visual.confusion import confusion_image
from utils.visual.images import class_names


@HOOKS.register()
class ConfusionMatrix(EvaluationPictures):
    """Counts (true class, predicted class) over the whole split and draws them after each
    validation (tag ``val/confusion_matrix``) and the test (``test/confusion_matrix``).

    Every rank counts its slice; the counts are summed over the ranks after the
    evaluation (one reduction that every rank joins, also one whose slice was empty),
    so the matrix is the one a single process would count. Rank 0 draws it.
    Video runs count clips.
    """

    tasks = ("classification", "video")

    def __init__(self, splits: EvalSplits = ("val", "test")) -> None:
        self.splits = tuple(splits)
        self.counts: Dict[str, torch.Tensor] = {}
        self.names: Optional[List[str]] = None

    def after_eval_batch(self, trainer: Any, batch: EvalBatch) -> None:
        if batch.split not in self.splits:
            return
        num_classes = batch.outputs.shape[1]
        labels = target_labels(batch.targets).to(batch.outputs.device).long().view(-1)
        predicted = batch.outputs.argmax(dim=1).view(-1)
        counts = torch.bincount(labels * num_classes + predicted, minlength=num_classes * num_classes)
        counts = counts.view(num_classes, num_classes).to("cpu", torch.float64)
        self.counts[batch.split] = self.counts[batch.split] + counts if batch.split in self.counts else counts
        if self.names is None:
            self.names = class_names(batch.loader)

    def matrix(self, split: str) -> Optional[torch.Tensor]:
        """``split``'s counts summed over all ranks (every rank calls this), then forgotten; None when no rank saw a batch."""
        local = self.counts.pop(split, None)
        return all_reduce_sums({"confusion": local} if local is not None else {}).get("confusion")

    def write(self, trainer: Any, split: str) -> None:
        if split not in self.splits:
            return
        matrix = self.matrix(split)
        if matrix is not None and trainer.dist.is_main:
            title = f"{split} epoch {trainer.state.epoch}"
            trainer.writer.image(
                f"{split}/confusion_matrix", confusion_image(matrix.numpy(), self.names, title), trainer.state.step
            )
