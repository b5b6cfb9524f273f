"""Classification: the validation images the model got wrong with the highest confidence, in TensorBoard."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import torch

from utils.config.arguments import Count, EvalSplits
from utils.hook import EvalBatch
from utils.hook.pictures import EvaluationPictures
from utils.metrics.base import target_labels
from utils.registry import HOOKS
from utils.visual.images import (
    as_images,
    caption,
    chunks,
    class_names,
    grid,
    label_name,
    loader_normalization,
    to_display,
    to_tiles,
)

Mistake = Tuple[float, torch.Tensor, int, int]  # confidence, display image [3, H, W], true, predicted


@HOOKS.register()
class ConfidentMistakes(EvaluationPictures):
    """After each validation, a grid of the ``images`` wrongly classified images with the
    highest softmax confidence (tag ``val/confident_mistakes``), each captioned with its
    true and predicted class and the confidence.

    Drawn from rank 0's slice (with N ranks: the most confident mistakes among its
    1/N of the split), from the batches the evaluation already ran; at most ``images``
    images are kept at any time. Clips show their middle frame.
    """

    tasks = ("classification",)

    def __init__(self, images: Count = 16, size: Count = 64, per_row: Count = 8, splits: EvalSplits = ("val",)) -> None:
        self.images, self.size, self.per_row, self.splits = images, size, per_row, tuple(splits)
        self.kept: Dict[str, List[Mistake]] = {}
        self.names: Optional[List[str]] = None

    def after_eval_batch(self, trainer: Any, batch: EvalBatch) -> None:
        if batch.split not in self.splits or not trainer.dist.is_main:
            return
        confidence, predicted = torch.softmax(batch.outputs.detach().float(), dim=1).max(dim=1)
        labels = target_labels(batch.targets).to(predicted.device).view(-1)
        wrong = (predicted != labels).nonzero().view(-1)
        wrong = wrong[confidence[wrong].argsort(descending=True)[: self.images]].cpu()
        if len(wrong) == 0:
            return
        if self.names is None:
            self.names = class_names(batch.loader)
        inputs = as_images(batch.inputs)
        images = to_display(inputs[wrong.to(inputs.device)], *loader_normalization(batch.loader))
        found = zip(confidence[wrong].tolist(), images, labels[wrong].tolist(), predicted[wrong].tolist())
        kept = self.kept.setdefault(batch.split, []) + list(found)
        self.kept[batch.split] = sorted(kept, key=lambda m: -m[0])[: self.images]

    def write(self, trainer: Any, split: str) -> None:
        kept = self.kept.pop(split, [])
        if not kept:
            return
        tiles = to_tiles(torch.stack([m[1] for m in kept]), self.size)
        named = [(label_name(self.names, true), label_name(self.names, pred)) for _, _, true, pred in kept]
        tiles = [
            caption(tile, [f"true {t}", f"pred {p} ({m[0]:.2f})"], size=11)
            for tile, (t, p), m in zip(tiles, named, kept)
        ]
        trainer.writer.image(f"{split}/confident_mistakes", grid(chunks(tiles, self.per_row)), trainer.state.step)
