"""Video: a few validation clips as frame strips with their true and predicted classes, in TensorBoard."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

import torch

from utils.config.arguments import Count, EvalSplits
from utils.hook import EvalBatch
from utils.hook.pictures import EvaluationPictures
from utils.metrics.base import target_labels
from utils.registry import HOOKS
from utils.visual.images import (
    caption,
    class_names,
    grid,
    input_tensor,
    label_name,
    loader_normalization,
    to_display,
    to_tiles,
)


def frame_indices(length: int, frames: int) -> List[int]:
    """At most ``frames`` evenly spaced indices of ``range(length)``, first and last included."""
    if length <= frames:
        return list(range(length))
    return [round(i * (length - 1) / (frames - 1)) for i in range(frames)] if frames > 1 else [length // 2]


@HOOKS.register()
class ClipStrips(EvaluationPictures):
    """After each validation (tag ``val/clips``): one row per clip, its frames left to right
    (at most ``frames``, evenly spaced), captioned with the true and predicted class and
    the confidence of the clip's prediction.

    The clips are the first ``clips`` of rank 0's slice, one per video (the same ones
    every time), taken from the batches the evaluation already ran. Rank 0 only.
    """

    tasks = ("video",)

    def __init__(self, clips: Count = 4, frames: Count = 8, size: Count = 64, splits: EvalSplits = ("val",)) -> None:
        self.clips, self.frames, self.size, self.splits = clips, frames, size, tuple(splits)
        self.rows: Dict[str, List[List[Any]]] = {}
        self.videos: Dict[str, Set[int]] = {}  # videos already shown: one clip each
        self.names: Optional[List[str]] = None

    def after_eval_batch(self, trainer: Any, batch: EvalBatch) -> None:
        if batch.split not in self.splits or not trainer.dist.is_main:
            return
        rows = self.rows.setdefault(batch.split, [])
        if len(rows) >= self.clips:
            return
        if self.names is None:
            self.names = class_names(batch.loader)
        confidence, predicted = torch.softmax(batch.outputs.detach().float(), dim=1).max(dim=1)
        labels = target_labels(batch.targets).view(-1)
        mean, std = loader_normalization(batch.loader)
        for i in self._pick(batch, self.clips - len(rows)):
            # clip [C, T, H, W]
            clip, label, pred, conf = (
                input_tensor(batch.inputs)[i],
                int(labels[i]),
                int(predicted[i]),
                float(confidence[i]),
            )
            frames = to_tiles(
                to_display(clip[:, frame_indices(clip.shape[1], self.frames)].transpose(0, 1), mean, std), self.size
            )
            text = f"true {label_name(self.names, label)}  pred {label_name(self.names, pred)} ({conf:.2f})"
            rows.append([caption(grid([frames], pad=1), [text], size=11)])

    def _pick(self, batch: EvalBatch, count: int) -> List[int]:
        """Up to ``count`` positions in the batch, each of a video not shown yet (clip targets carry ``video``)."""
        videos = batch.targets.get("video") if isinstance(batch.targets, dict) else None
        # no video ids: every clip is new
        ids = videos.tolist() if videos is not None else list(range(-len(batch.inputs), 0))
        seen = self.videos.setdefault(batch.split, set())
        picked: List[int] = []
        for i, video in enumerate(ids):
            if len(picked) < count and video not in seen:
                seen.add(video)
                picked.append(i)
        return picked

    def write(self, trainer: Any, split: str) -> None:
        rows = self.rows.pop(split, [])
        self.videos.pop(split, None)
        if rows:
            trainer.writer.image(f"{split}/clips", grid(rows), trainer.state.step)
