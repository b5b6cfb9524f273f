"""The ``sod`` metric on hand-made prediction/mask pairs: MAE by hand, everything else equal to
pysodmetrics run directly on the same arrays; exact aggregation over slices of the split."""

import warnings

import numpy as np
import py_sod_metrics as psm
import pytest
import torch

from utils.errors import ConfigError, DataError
from utils.metrics.sod import SODMetrics, saliency_maps
from utils.registry import METRICS


def pairs():
    """(uint8 prediction, uint8 mask) of different sizes; the predictions span 0..255 or are
    constant, so pysodmetrics' min-max normalisation leaves their values unchanged."""
    gt_a = np.zeros((6, 8), np.uint8)
    gt_a[1:4, 2:6] = 255  # 12 foreground pixels
    pred_a = gt_a.copy()
    pred_a[1, 2] = pred_a[3, 5] = 0  # 2 missed foreground pixels
    pred_a[5, 0] = pred_a[5, 7] = pred_a[0, 0] = 255  # 3 false alarms
    gt_b = np.zeros((5, 7), np.uint8)
    gt_b[2:, 3:] = 255
    pred_b = np.where(gt_b > 0, 255, 0).astype(np.uint8)
    pred_b[0, :] = 51  # 7 background pixels at 0.2
    gt_c = np.zeros((7, 5), np.uint8)
    gt_c[0:3, 0:2] = 255  # 6 foreground pixels
    pred_c = np.full((7, 5), 102, np.uint8)  # constant 0.4
    gt_d = np.zeros((4, 9), np.uint8)  # no salient object at all
    pred_d = np.zeros((4, 9), np.uint8)
    pred_d[2, 4] = 255
    return [(pred_a, gt_a), (pred_b, gt_b), (pred_c, gt_c), (pred_d, gt_d)]


HAND_MAE = [5 / 48, 7 * 0.2 / 35, (6 * 0.6 + 29 * 0.4) / 35, 1 / 36]


def logits_of(pred: np.ndarray) -> torch.Tensor:
    """Logits whose sigmoid, times 255 and rounded, gives back ``pred`` exactly (0 and 255 map to -inf/inf)."""
    return torch.logit(torch.from_numpy(pred).double() / 255.0).float()[None, None]


def feed(metric, items):
    for pred, gt in items:
        metric.update(logits_of(pred), {"mask": torch.from_numpy(gt)[None, None].float() / 255, "original": [gt]})


def reference(items):
    """pysodmetrics used the way its README shows, over all pairs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Fmeasure (v1) announces its successor; it is the reference here
        evaluators = {
            "fm": psm.Fmeasure(),
            "wfm": psm.WeightedFmeasure(),
            "sm": psm.Smeasure(),
            "em": psm.Emeasure(),
            "mae": psm.MAE(),
        }
    for pred, gt in items:
        for evaluator in evaluators.values():
            evaluator.step(pred=pred, gt=gt)
    fm = evaluators["fm"].get_results()["fm"]
    em = evaluators["em"].get_results()["em"]
    return {
        "mae": evaluators["mae"].get_results()["mae"],
        "max_f": fm["curve"].max(),
        "mean_f": fm["curve"].mean(),
        "adp_f": fm["adp"],
        "s_measure": evaluators["sm"].get_results()["sm"],
        "e_measure": em["curve"].mean(),
        "max_e": em["curve"].max(),
        "adp_e": em["adp"],
        "weighted_f": evaluators["wfm"].get_results()["wfm"],
    }


def test_every_metric_equals_pysodmetrics_and_mae_the_hand_value():
    items = pairs()
    metric = METRICS.build("sod")
    feed(metric, items)
    got, want = metric.result(), reference(items)
    assert set(got) == set(want)
    for name in want:
        assert got[name] == pytest.approx(float(want[name]), rel=1e-12, abs=1e-12), name
    assert got["mae"] == pytest.approx(np.mean(HAND_MAE), abs=1e-12)
    # each pair alone, too (per-image values, not only their mean)
    for (pred, gt), mae in zip(items, HAND_MAE):
        single = METRICS.build("sod")
        feed(single, [(pred, gt)])
        assert single.result()["mae"] == pytest.approx(mae, abs=1e-12)
        assert single.result()["s_measure"] == pytest.approx(float(reference([(pred, gt)])["s_measure"]), abs=1e-12)


def test_sums_of_disjoint_shards_give_the_whole_split_result():
    items = pairs()
    whole, left, right = SODMetrics(), SODMetrics(), SODMetrics()
    feed(whole, items)
    feed(left, items[:1])
    feed(right, items[1:])
    combined = {k: left.sums[k] + right.sums[k] for k in whole.sums}
    assert left.compute(combined) == pytest.approx(whole.result(), rel=1e-12, abs=1e-15)
    assert whole.result()["max_f"] != pytest.approx(left.result()["max_f"])  # the slices really differ


def test_predictions_are_resized_to_the_original_size_before_scoring():
    gt = pairs()[0][1]
    low = torch.full((1, 1, 3, 4), 2.0)  # a constant map predicted at a lower resolution
    (saliency,) = saliency_maps(low, [gt.shape])
    assert saliency.shape == gt.shape and saliency.dtype == np.uint8
    assert (saliency == round(255 / (1 + np.exp(-2.0)))).all()
    metric = SODMetrics()
    metric.update(low, {"mask": torch.zeros(1, 1, 3, 4), "original": [gt]})
    assert metric.result()["mae"] == pytest.approx(float(reference([(saliency, gt)])["mae"]), abs=1e-12)


def test_tensor_targets_are_scored_at_their_own_size():
    pred, gt = pairs()[1]
    metric = SODMetrics()
    metric.update(logits_of(pred), torch.from_numpy(gt)[None, None].float() / 255)
    assert metric.result()["mae"] == pytest.approx(HAND_MAE[1], abs=1e-12)


def test_bad_prediction_shape_and_empty_split_are_clear_errors():
    metric = SODMetrics()
    with pytest.raises(ConfigError, match=r"\[B, 1, H, W\]"):
        metric.update(torch.zeros(2, 3, 4, 4), torch.zeros(2, 1, 4, 4))
    with pytest.raises(DataError, match="no images"):
        metric.result()
