"""Salient object detection metrics, per image from ``pysodmetrics``, aggregated exactly over ranks.

Per-image values (MAE, S-measure, weighted F, adaptive F/E) and per-image curves
over 256 thresholds (F-measure with beta^2 = 0.3, E-measure) are summed with an
image count; those sums all-reduce, so N ranks on disjoint slices give what one
process gives. The final numbers follow the field's toolkit (Fan's Matlab code,
re-implemented by ``pysodmetrics``): curves are averaged over images first, then
``max_f``/``max_e`` take the curve's maximum and ``mean_f``/``e_measure`` its
mean over thresholds. ``e_measure`` is the mean E-measure (meanEm); ``max_e``,
``adp_e`` and ``adp_f`` (adaptive threshold 2 x mean saliency) are reported too.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from utils.data.mask_encoding import mask_values
from utils.errors import ConfigError, DataError
from utils.files.names import inside
from utils.files.owned import make_dirs, open_file
from utils.metrics.base import Metric, target_mask
from utils.registry import METRICS

log = logging.getLogger(__name__)

SCALARS = ("mae", "s_measure", "weighted_f", "adp_f", "adp_e")
CURVES = ("f_curve", "e_curve")
THRESHOLDS = 256


def saliency_logits(outputs: Any) -> torch.Tensor:
    """The saliency logits ``[B, 1, H, W]`` (a dict output gives its ``mask`` entry)."""
    logits = outputs["mask"] if isinstance(outputs, dict) else outputs
    if logits.dim() == 3:
        logits = logits.unsqueeze(1)
    if logits.dim() != 4 or logits.shape[1] != 1:
        raise ConfigError(f"sod metric expects saliency logits [B, 1, H, W], got shape {list(logits.shape)}")
    return logits


def ground_truths(targets: Any) -> List[np.ndarray]:
    """uint8 (0-255) ground truths: the original-size masks when the dataset keeps them, else
    the (resized) mask tensor itself, each read by the datasets' mask rule
    (``utils/data/mask_encoding.py``: 0/1, 0/255, boolean and soft masks score alike)."""
    if isinstance(targets, dict) and "original" in targets:
        masks = [np.asarray(gt) for gt in targets["original"]]
    else:
        mask = target_mask(targets)
        masks = list((mask.squeeze(1) if mask.dim() == 4 else mask).detach().float().cpu().numpy())
    names = [str(n) for n in targets.get("name", [])] if isinstance(targets, dict) else []
    names += [f"ground truth {i} of the batch" for i in range(len(names), len(masks))]
    return [np.round(mask_values(gt, name) * 255.0).astype(np.uint8) for gt, name in zip(masks, names)]


def saliency_maps(outputs: Any, sizes: List[Tuple[int, int]]) -> List[np.ndarray]:
    """Sigmoid of the logits, resized (bilinear) to each ``(H, W)`` in ``sizes``, as uint8 0-255:
    the form a saliency map is saved and evaluated in."""
    probs = saliency_logits(outputs).detach().float().sigmoid()
    if len(sizes) != probs.shape[0]:
        raise ValueError(f"{probs.shape[0]} predictions but {len(sizes)} ground truths")
    maps = []
    for prob, size in zip(probs, sizes):
        if tuple(prob.shape[-2:]) != tuple(size):
            prob = F.interpolate(prob[None], size=tuple(size), mode="bilinear", align_corners=False)[0]
        maps.append((prob[0] * 255.0).round().clamp(0, 255).to(torch.uint8).cpu().numpy())
    return maps


def image_scores(pred: np.ndarray, gt: np.ndarray) -> Dict[str, Any]:
    """Every per-image value and curve of one uint8 prediction/ground-truth pair (pysodmetrics)."""
    import py_sod_metrics as psm

    fm = psm.FmeasureV2({"fm": psm.FmeasureHandler(with_dynamic=True, with_adaptive=True, beta=0.3)})
    evaluators = {"mae": psm.MAE(), "sm": psm.Smeasure(), "wfm": psm.WeightedFmeasure(), "em": psm.Emeasure(), "fm": fm}
    for evaluator in evaluators.values():
        evaluator.step(pred=pred, gt=gt)
    em = evaluators["em"].get_results()["em"]
    f = fm.get_results()["fm"]
    return {
        "mae": evaluators["mae"].get_results()["mae"],
        "s_measure": evaluators["sm"].get_results()["sm"],
        "weighted_f": evaluators["wfm"].get_results()["wfm"],
        "adp_f": f["adaptive"],
        "adp_e": em["adp"],
        "f_curve": f["dynamic"],
        "e_curve": em["curve"],
    }


@METRICS.register("sod")
class SODMetrics(Metric):
    """``mae``, ``max_f``, ``mean_f``, ``s_measure``, ``e_measure``, ``weighted_f`` (+ ``max_e``,
    ``adp_f``, ``adp_e``) of sigmoid(logits) against the ground truth at its original size."""

    def reset(self) -> None:
        # Every rank holds every key, also with an empty slice, so the all-reduce lines up.
        self.sums = {name: torch.zeros((), dtype=torch.float64) for name in (*SCALARS, "count")}
        self.sums.update({name: torch.zeros(THRESHOLDS, dtype=torch.float64) for name in CURVES})

    def __init__(self) -> None:
        super().__init__()
        self.reset()

    def update(self, outputs: Any, targets: Any) -> None:
        gts = ground_truths(targets)
        for pred, gt in zip(saliency_maps(outputs, [g.shape[:2] for g in gts]), gts):
            for name, value in image_scores(pred, gt).items():
                self.add(name, np.asarray(value, dtype=np.float64))
            self.add("count", 1)

    def reported_names(self) -> List[str]:
        return ["mae", "max_f", "mean_f", "s_measure", "e_measure", "weighted_f", "max_e", "adp_f", "adp_e"]

    def direction(self, name: str) -> Optional[str]:
        """A lower mean absolute error is better; higher F-, S- and E-measures are."""
        return ("min" if name == "mae" else "max") if name in self.reported_names() else None

    def compute(self, sums: Dict[str, torch.Tensor]) -> Dict[str, float]:
        count = sums["count"].item()
        if count == 0:
            raise DataError("sod metric saw no images; the evaluation split is empty")
        mean = {name: sums[name] / count for name in (*SCALARS, *CURVES)}
        return {
            "mae": mean["mae"].item(),
            "max_f": mean["f_curve"].max().item(),
            "mean_f": mean["f_curve"].mean().item(),
            "s_measure": mean["s_measure"].item(),
            "e_measure": mean["e_curve"].mean().item(),
            "weighted_f": mean["weighted_f"].item(),
            "max_e": mean["e_curve"].max().item(),
            "adp_f": mean["adp_f"].item(),
            "adp_e": mean["adp_e"].item(),
        }

    def prediction_writer(self, folder: Path) -> Optional[Callable[[Any, Any, Any], None]]:
        """Saves each saliency map as ``<folder>/<name>.png`` at its ground truth's original size
        (the same uint8 map the metrics were computed on)."""
        return SaliencyWriter(folder)


class SaliencyWriter:
    """``on_batch`` callback for ``evaluate``: one grey PNG per image, named by ``targets["name"]``.

    Ranks evaluate disjoint slices, so every rank writes its own images without collisions.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        make_dirs(self.folder, self.folder)  # the test run's predictions/: new, made by this run

    def __call__(self, inputs: Any, outputs: Any, targets: Any) -> None:
        from PIL import Image

        if not isinstance(targets, dict) or "name" not in targets:
            raise ConfigError("eval.save_predictions needs a dataset whose targets carry image names ({'name': [...]})")
        gts = ground_truths(targets)
        for name, saliency in zip(targets["name"], saliency_maps(outputs, [g.shape[:2] for g in gts])):
            path = inside(self.folder, f"{name}.png", "the sample name of a saliency map")
            make_dirs(self.folder, path.parent)
            with open_file(self.folder, path, "wb") as fh:  # never through a link (utils/files/owned.py)
                Image.fromarray(saliency).save(fh, format="PNG")
