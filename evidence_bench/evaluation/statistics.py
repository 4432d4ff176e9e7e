"""Per-query score summaries and paired significance tests, for the report and the gate.

Inputs are per-query scores of one measure, paired by position: ``a[i]`` and ``b[i]`` are the
baseline and the treatment on the same query. Tests are two-sided and never return NaN: when
there is no difference to test (all differences zero, or fewer than two pairs) the p-value is
1.0, i.e. no evidence of a difference.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "Summary",
    "holm",
    "improved_degraded",
    "paired_t_test",
    "randomization_test",
    "summarize",
]

#: Differences this small are float noise (e.g. 0.1 + 0.2 vs 0.3), not a difference.
_TOLERANCE = 1e-12
#: Sign matrices are drawn in blocks of about this many cells to bound memory.
_BLOCK_CELLS = 4_000_000


@dataclass(frozen=True, slots=True)
class Summary:
    """Mean of ``n`` values, sample standard deviation, and a Student's t confidence interval."""

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    """Mean, sample std (ddof=1) and the t-interval mean ± t(1-α/2, n-1)·std/√n.

    ``n == 0`` gives NaNs; ``n == 1`` gives std 0.0 and an interval of the mean itself.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = len(values)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    data = np.asarray(values, dtype=np.float64)
    mean = float(data.mean())
    if n == 1:
        return Summary(1, mean, 0.0, mean, mean)
    std = float(data.std(ddof=1))
    half = float(stats.t.ppf((1.0 + confidence) / 2.0, n - 1)) * std / math.sqrt(n)
    return Summary(n, mean, std, mean - half, mean + half)


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Student's paired t-test, as :func:`scipy.stats.ttest_rel` gives.

    It is the one-sample t-test of the differences against 0, run here on the differences with
    float noise removed. Differences that are all equal and non-zero have no variance: t is
    infinite and p is 0.0.
    """
    diffs = _differences(a, b)
    if len(diffs) < 2 or not np.any(diffs):
        return 1.0
    if float(np.ptp(diffs)) <= _TOLERANCE:
        return 0.0
    with warnings.catch_warnings():
        # Nearly constant differences make scipy warn of precision loss; p is still ~0.
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(stats.ttest_1samp(diffs, 0.0).pvalue)


def randomization_test(
    a: Sequence[float], b: Sequence[float], *, trials: int = 10_000, seed: int = 0
) -> float:
    """Two-sided p-value of a paired randomization (sign-flip) test on the mean difference.

    Under the null hypothesis each query's pair is exchangeable, so each difference's sign is
    a coin flip (Fisher 1935; Smucker, Allan & Carterette 2007 for IR). p counts the observed
    assignment among the trials: (#{|mean*| >= |mean| - 1e-12} + 1) / (trials + 1).
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    diffs = _differences(a, b)
    n = len(diffs)
    if n == 0 or not np.any(diffs):
        return 1.0
    observed = abs(float(diffs.mean())) - _TOLERANCE
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_CELLS // n)
    extreme = 0
    done = 0
    while done < trials:
        rows = min(block, trials - done)
        signs = rng.integers(0, 2, size=(rows, n), dtype=np.int8) * 2 - 1
        means = np.abs(signs @ diffs) / n
        extreme += int(np.count_nonzero(means >= observed))
        done += rows
    return (extreme + 1) / (trials + 1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input's order (Holm 1979).

    Sorted ascending, p_(i) becomes max over j <= i of min(1, (m - j + 1) · p_(j)).
    """
    m = len(pvalues)
    for p in pvalues:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"p-values must be in [0, 1], got {p}")
    adjusted = [0.0] * m
    running = 0.0
    for j, index in enumerate(sorted(range(m), key=pvalues.__getitem__)):
        running = max(running, min(1.0, (m - j) * pvalues[index]))
        adjusted[index] = running
    return adjusted


def improved_degraded(
    a: Sequence[float], b: Sequence[float], eps: float = 1e-9
) -> tuple[int, int, int]:
    """Counts of queries where ``b`` beats ``a`` by more than ``eps``, loses, and ties."""
    _check_pairs(a, b)
    improved = sum(1 for x, y in zip(a, b, strict=True) if y > x + eps)
    degraded = sum(1 for x, y in zip(a, b, strict=True) if y < x - eps)
    return improved, degraded, len(a) - improved - degraded


def _check_pairs(a: Sequence[float], b: Sequence[float]) -> None:
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")


def _differences(a: Sequence[float], b: Sequence[float]) -> np.ndarray:
    """b - a, with float noise below the tolerance set to exactly zero."""
    _check_pairs(a, b)
    diffs = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(diffs)):
        raise ValueError("paired samples must be finite numbers (found NaN or infinity)")
    diffs[np.abs(diffs) < _TOLERANCE] = 0.0
    return diffs
