"""Clip and video accuracy for clip datasets whose targets carry the video index.

Each evaluation item is one clip, ``targets = {"label": [B], "video": [B]}``.
Clip top-k counts every clip on its own; video top-k averages the softmax
probabilities of all clips of a video and ranks that average. The per-video
state is additive (a ``[num_videos, num_classes]`` sum of probabilities, and per
video a clip count and a label sum), so summing it over ranks is exact even
when the clips of one video are spread over several ranks. The state is
8 bytes per video and class (Kinetics-400 validation: about 64 MB).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import torch
import torch.nn.functional as F

from utils.distributed.ops import all_gather_objects
from utils.errors import ConfigError
from utils.metrics.base import Metric
from utils.registry import METRICS


def _grow(tensor: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """``tensor`` zero-padded at the end of each dimension up to ``shape``."""
    if tuple(tensor.shape) == tuple(shape):
        return tensor
    out = torch.zeros(shape, dtype=tensor.dtype)
    out[tuple(slice(0, n) for n in tensor.shape)] = tensor
    return out


@METRICS.register("video")
class VideoAccuracy(Metric):
    """``clip_top1``, ``clip_top5``, ``video_top1``, ``video_top5`` (top-k capped at the number of classes).

    The number of videos and classes is read from the data: the per-video sums
    grow with the largest video index seen, and ``result`` first agrees on the
    sizes over all ranks, so no config has to name them.
    """

    def __init__(self, topk: Sequence[int] = (1, 5)) -> None:
        super().__init__()
        self.topk = tuple(topk)

    def update(self, outputs: torch.Tensor, targets: Any) -> None:
        if not isinstance(targets, dict) or "video" not in targets:
            raise ConfigError(
                "metric 'video' needs targets {'label', 'video'} (the clip's video index); "
                "use a clip dataset (video_frames_folder, moving_shapes) or eval.metric=classification"
            )
        labels, videos = targets["label"].cpu().long(), targets["video"].cpu().long()
        probs = F.softmax(outputs.detach().double(), dim=1).cpu()
        num_videos = max(int(videos.max()) + 1, self.sums["video_clips"].numel() if self.sums else 0)
        self._resize(num_videos, probs.shape[1])
        self.sums["video_scores"].index_add_(0, videos, probs)
        self.sums["video_clips"].index_add_(0, videos, torch.ones(len(videos), dtype=torch.float64))
        self.sums["video_label_sum"].index_add_(0, videos, labels.double())
        hits = self._hits(probs, labels)
        for k in self.topk:
            self.add(f"clip_correct{k}", hits[k].sum())
        self.add("clip_count", len(labels))

    def _resize(self, num_videos: int, num_classes: int) -> None:
        """Create or zero-pad the sums to ``num_videos`` x ``num_classes``."""
        shapes = {
            "video_scores": (num_videos, num_classes),
            "video_clips": (num_videos,),
            "video_label_sum": (num_videos,),
        }
        for name, shape in shapes.items():
            current = self.sums.get(name)
            self.sums[name] = torch.zeros(shape, dtype=torch.float64) if current is None else _grow(current, shape)
        for name in [f"clip_correct{k}" for k in self.topk] + ["clip_count"]:
            self.sums.setdefault(name, torch.zeros((), dtype=torch.float64))

    def _hits(self, scores: torch.Tensor, labels: torch.Tensor) -> Dict[int, torch.Tensor]:
        k_max = min(max(self.topk), scores.shape[1])
        ranked = scores.topk(k_max, dim=1).indices.eq(labels.view(-1, 1))
        return {k: ranked[:, : min(k, k_max)].any(dim=1) for k in self.topk}

    def result(self) -> Dict[str, float]:
        """Pad every rank's sums to the largest video count and class count, then reduce."""
        local = tuple(self.sums["video_scores"].shape) if self.sums else (0, 0)
        num_videos, num_classes = (max(sizes) for sizes in zip(*all_gather_objects(local)))
        self._resize(num_videos, num_classes)
        return super().result()

    def reported_names(self) -> List[str]:
        return [f"{level}_top{k}" for level in ("clip", "video") for k in self.topk] + ["videos"]

    def direction(self, name: str) -> Optional[str]:
        return "max" if name in self.reported_names() and name != "videos" else None

    def compute(self, sums: Dict[str, torch.Tensor]) -> Dict[str, float]:
        results = {
            f"clip_top{k}": (sums[f"clip_correct{k}"] / sums["clip_count"].clamp_min(1)).item() for k in self.topk
        }
        seen = sums["video_clips"] > 0  # videos without clips in this evaluation do not count
        scores = sums["video_scores"][seen] / sums["video_clips"][seen, None]
        labels = (sums["video_label_sum"][seen] / sums["video_clips"][seen]).round().long()
        hits = self._hits(scores, labels) if len(labels) else {k: torch.zeros(0, dtype=torch.bool) for k in self.topk}
        for k in self.topk:
            results[f"video_top{k}"] = hits[k].double().sum().item() / max(len(labels), 1)
        results["videos"] = len(labels)  # a count: printed videos=6, not 6.0000
        return results
