"""Statistics over a configuration's seeds: the mean, the sample standard deviation, a 95% Student-t interval
of the mean, and Welch's t-test against the best configuration.

Seeds are few (3 to 5), so the interval is Student's t: mean +- t(0.975, n-1) * std / sqrt(n), which assumes
the seeds' values are roughly normal; a bootstrap over 3 values would only resample those 3 and come out too
narrow. Welch's t-test (two-sided) does not assume that two configurations spread alike, as a learning rate
against another does not. Neither exists for one seed: the std, the interval and the p-value stay empty.
"""

from __future__ import annotations

import math
import statistics
import warnings
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Sequence

import numpy as np

CONFIDENCE = 0.95


@dataclass(frozen=True)
class Summary:
    """One metric over one configuration's seeds; std and the interval are None for one seed."""

    n: int
    mean: float
    std: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]


@lru_cache(maxsize=None)
def t_quantile(df: int) -> float:
    """Student's t quantile at ``(1 + CONFIDENCE) / 2`` with ``df`` degrees of freedom (4.303 for 2)."""
    # scipy.stats takes 0.7 s to import: only --mode compare pays for it, never a training start
    from scipy.stats import t

    return float(t.ppf((1 + CONFIDENCE) / 2, df))


def summarize(values: Sequence[float]) -> Summary:
    """Mean, sample standard deviation (ddof=1) and the Student-t interval of the mean of ``values``."""
    n = len(values)
    finite = all(math.isfinite(value) for value in values)
    mean = (math.fsum(values) if finite else sum(values)) / n  # fsum refuses inf - inf; NaN and inf stay themselves
    if n < 2:
        return Summary(n, mean, None, None, None)
    if not finite:  # a NaN metric is written, never dropped (README, "NaN metrics"): it has no spread either
        return Summary(n, mean, math.nan, math.nan, math.nan)
    std = statistics.stdev(values, xbar=mean)
    half = t_quantile(n - 1) * std / math.sqrt(n)
    return Summary(n, mean, std, mean - half, mean + half)


def welch_p_values(samples: Sequence[Sequence[float]], best: Sequence[float]) -> List[Optional[float]]:
    """The two-sided p-value of Welch's t-test of each of ``samples`` against ``best``; None where either side has
    fewer than two values, a NaN or an infinity, or where neither spreads at all (no variance to test against)."""
    found: List[Optional[float]] = [None] * len(samples)
    if len(best) < 2 or not all(math.isfinite(value) for value in best):
        return found
    # exact (statistics sums fractions): scipy's float variance of [0.7, 0.7] is 1e-33, and its p-value 0.0
    best_spreads = statistics.variance(best) > 0
    by_size: Dict[int, List[int]] = {}
    for index, values in enumerate(samples):
        if len(values) < 2 or not all(math.isfinite(value) for value in values):
            continue
        if best_spreads or statistics.variance(values) > 0:
            by_size.setdefault(len(values), []).append(index)
    from scipy.stats import ttest_ind  # see t_quantile: imported where it is needed

    for indices in by_size.values():  # samples of one size in one call: 200 configurations in 2 ms, not 200 ms
        with warnings.catch_warnings():  # seeds that agree to the last bit: scipy warns of precision, the test holds
            warnings.simplefilter("ignore", RuntimeWarning)
            rows = np.array([samples[index] for index in indices], dtype=np.float64)
            p_values = ttest_ind(rows, np.array([best], dtype=np.float64), axis=1, equal_var=False).pvalue
        for index, p in zip(indices, np.atleast_1d(p_values).tolist()):
            found[index] = None if math.isnan(p) else p
    return found
