"""Saliency losses on dense maps: values by hand on saturated predictions, dict targets, weights."""

import pytest
import torch
import torch.nn.functional as F

from utils.model.criterion import build_criterion
from utils.registry import LOSSES

BIG = 40.0  # sigmoid(+-BIG) is 0 or 1 to float32 precision


def saturated(pattern):
    """Logits whose sigmoid is the 0/1 ``pattern``."""
    return (torch.tensor(pattern, dtype=torch.float32) * 2 - 1) * BIG


def test_cel_and_iou_match_the_region_counts():
    # image 0: TP=2, FP=1, FN=1; image 1: TP=1, FP=0, FN=3
    pred = saturated([[[[1, 1, 1, 0]]], [[[1, 0, 0, 0]]]])
    mask = torch.tensor([[[[1, 1, 0, 1]]], [[[1, 1, 1, 1]]]], dtype=torch.float32)
    targets = {"mask": mask, "name": ["a", "b"]}
    cel = LOSSES.build("cel")(pred, targets)
    assert cel.item() == pytest.approx(((1 + 1) / (1 + 4 + 1) + (0 + 3) / (0 + 2 + 3)) / 2, abs=1e-6)
    batch_cel = LOSSES.build("cel", per_image=False)(pred, targets)
    assert batch_cel.item() == pytest.approx((1 + 1 + 3) / (1 + 6 + 4), abs=1e-6)
    iou = LOSSES.build("iou")(pred, targets)
    assert iou.item() == pytest.approx(((1 - 2 / 4) + (1 - 1 / 4)) / 2, abs=1e-6)
    perfect = LOSSES.build("cel")(saturated(mask.tolist()), mask)  # plain tensor target
    assert perfect.item() == pytest.approx(0.0, abs=1e-6)


def test_bce_handles_dense_dict_targets_and_weights_combine():
    torch.manual_seed(0)
    logits = torch.randn(2, 1, 5, 6)
    mask = (torch.rand(2, 1, 5, 6) > 0.5).float()
    bce = LOSSES.build("bce_with_logits")(logits, {"mask": mask, "original": [None, None]})
    assert bce.item() == pytest.approx(F.binary_cross_entropy_with_logits(logits, mask).item(), rel=1e-6)
    combined = build_criterion(
        [{"name": "bce_with_logits", "weight": 1.0}, {"name": "cel", "weight": 0.5}, {"name": "iou", "weight": 2.0}]
    )
    want = bce + 0.5 * LOSSES.build("cel")(logits, mask) + 2.0 * LOSSES.build("iou")(logits, mask)
    assert combined(logits, {"mask": mask}).item() == pytest.approx(want.item(), rel=1e-6)


def test_a_mask_of_another_size_is_a_clear_error():
    with pytest.raises(ValueError, match="must predict at the mask's size"):
        LOSSES.build("iou")(torch.zeros(1, 1, 4, 4), {"mask": torch.zeros(1, 1, 8, 8)})
