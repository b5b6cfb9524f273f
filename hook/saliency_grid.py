"""Salient object detection: image | ground truth | prediction for a fixed set of images, in TensorBoard."""

from __future__ import annotations

from typing import Any, Dict, List

from utils.config.arguments import Count, EvalSplits
from utils.hook import EvalBatch
from utils.hook.pictures import EvaluationPictures
from utils.metrics.base import target_mask
from utils.metrics.sod import saliency_logits
from utils.registry import HOOKS
from utils.visual.images import grid, input_tensor, loader_normalization, text_tile, to_display, to_tiles

ROWS = ("image", "ground truth", "prediction")
HEADING = 84  # pixels for the row names


@HOOKS.register()
class SaliencyGrid(EvaluationPictures):
    """After each validation (tag ``val/saliency_grid``) and after the test (``test/saliency_grid``):
    three rows (image, ground truth, predicted saliency) of a column per image, ``size`` pixels high.

    The images are the first ``images`` of rank 0's slice, taken from the batches the
    evaluation already ran: the same images every time, so progress is visible, and no
    extra forward pass. Rank 0 only.
    """

    tasks = ("sod",)

    def __init__(self, images: Count = 8, size: Count = 96, splits: EvalSplits = ("val", "test")) -> None:
        self.images, self.size, self.splits = images, size, tuple(splits)
        self.columns: Dict[str, List[List[Any]]] = {split: [] for split in self.splits}  # per image: its three tiles

    def after_eval_batch(self, trainer: Any, batch: EvalBatch) -> None:
        columns = self.columns.get(batch.split)
        if columns is None or not trainer.dist.is_main or len(columns) >= self.images:
            return
        take = self.images - len(columns)
        mean, std = loader_normalization(batch.loader)
        images = to_display(input_tensor(batch.inputs)[:take], mean, std)
        masks = to_display(target_mask(batch.targets)[:take].float())
        predictions = to_display(saliency_logits(batch.outputs)[:take].detach().float().sigmoid())
        columns.extend(
            [list(tiles) for tiles in zip(*(to_tiles(part, self.size) for part in (images, masks, predictions)))]
        )

    def write(self, trainer: Any, split: str) -> None:
        columns = self.columns.get(split)
        if columns:
            rows = [
                [text_tile(name, HEADING, self.size), *(tiles[i] for tiles in columns)] for i, name in enumerate(ROWS)
            ]
            trainer.writer.image(f"{split}/saliency_grid", grid(rows), trainer.state.step)
            columns.clear()
