"""Per-query score summaries and paired significance tests: the one home of the run's statistics.

Inputs are per-query scores of one measure, paired by position: ``a[i]`` and ``b[i]`` are the
baseline and the treatment on the same query. Tests are two-sided. Each test has a scalar
form and an array form for thousands at once (:mod:`evidence_bench.evaluation.comparisons`).

One tolerance, :data:`TIE`, says when two scores are equal: a difference within it is set to
exactly zero before any test, and a query is improved or degraded only beyond it.

Defined answers at the edges (each is worked by hand in ``tests/test_statistics.py``):

- the mean of one value has no confidence interval: NaN bounds (the report shows "–"),
  never a zero-width interval that would claim certainty;
- differences that are all zero give p = 1 in both tests: every sign assignment is as
  extreme as the observed one, and t's 0/0 is read as "no difference";
- Student's t is undefined (NaN) for one pair (no degrees of freedom) and for differences
  that are all equal and non-zero: t = mean / (0 / √n) has no finite value, and its limit,
  p = 0, would claim certainty from, e.g., two queries that gained the same. The
  randomization test answers such data from its definition: the exact p is the share of
  the 2^n sign assignments whose |mean| reaches the observed one, 2 / 2^n; sampled, it is
  (1 + count) / (1 + trials).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from evidence_bench._lazy import module
from evidence_bench.errors import DataError

if TYPE_CHECKING:
    import pandas as pd
    from scipy import special
else:
    pd = module("pandas")
    special = module("scipy.special")


__all__ = [
    "BLOCK_CELLS",
    "MIN_TRIALS",
    "TIE",
    "Summary",
    "fieller_intervals",
    "first_met",
    "group_codes",
    "holm",
    "improved_degraded",
    "ngroups",
    "paired_t_test",
    "randomization_test",
    "selection_intervals",
    "sign_flip_p_values",
    "summarize",
    "summarize_codes",
    "summarize_groups",
    "t_intervals",
    "t_test_p_values",
    "trials_for",
]

#: Two scores closer than this are equal: float noise (0.1 + 0.2 vs 0.3), not a difference.
#: trec_eval measures are in [0, 1] and differ by far more when rankings differ.
TIE = 1e-9
#: The fewest randomization trials a run uses; more when its Holm families are large.
MIN_TRIALS = 5000
#: Sign and product matrices are built in blocks of about this many cells to bound memory
#: (the signs of a test of n queries: blocks of BLOCK_CELLS // n rows, part of the stream).
BLOCK_CELLS = 4_000_000

Floats = npt.NDArray[np.float64]


# Student's t from scipy.special, the functions scipy.stats.t itself calls (``t._ppf`` is
# ``stdtrit(df, q)``, ``t._sf`` is ``stdtr(df, -x)``): the same floats, without importing
# scipy.stats, whose import dominates a report's start-up.
def _t_ppf(q: float, df: npt.ArrayLike) -> Floats:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom, element-wise."""
    return np.asarray(special.stdtrit(np.asarray(df, dtype=np.float64), q), dtype=np.float64)


def _t_sf(x: npt.ArrayLike, df: npt.ArrayLike) -> Floats:
    """P(T > x) for Student's t with ``df`` degrees of freedom, element-wise."""
    value = -np.asarray(x, dtype=np.float64)
    return np.asarray(special.stdtr(np.asarray(df, dtype=np.float64), value), dtype=np.float64)


def group_codes(
    frame: pd.DataFrame, keys: Sequence[str], *, text: bool = False
) -> npt.NDArray[np.int64] | None:
    """One int64 per row numbering its (``keys``) group, from the keys' category codes (and
    an integer key's values, or with ``text`` any other key's, factorized): what a groupby
    on the keys would group, without its per-key int64 copies; None when a key is none of
    these, or is missing somewhere."""
    cell = np.zeros(len(frame), dtype=np.int64)
    space = 1
    for key in keys:
        column = frame[key]
        if isinstance(column.dtype, pd.CategoricalDtype):
            codes = column.cat.codes.to_numpy()
            size = len(column.cat.categories)
        elif pd.api.types.is_integer_dtype(column.dtype):
            codes, uniques = pd.factorize(column.to_numpy())
            size = len(uniques)
        elif text:
            codes, values = pd.factorize(column)
            size = len(values)
        else:
            return None
        space *= max(size, 1)
        if space >= 1 << 62 or (len(codes) and codes.min() < 0):
            return None
        cell *= size
        cell += codes
    return cell


def first_met(cell: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """Each row's group, the groups numbered in the order first met, and each group's first
    row (ascending): :func:`numpy.unique`'s ``return_index`` and ``return_inverse`` up to the
    groups' numbering, without a sort. Codes from a small range (:func:`_small_range`)
    find each code's first row by one ``minimum.at`` over a table of the range; others are hashed
    (:func:`pandas.factorize`), and a group is new exactly where the running maximum of
    the codes grows."""
    if len(cell) and _small_range(cell):
        rows = len(cell)
        at = np.full(int(cell.max()) + 1, rows, dtype=np.intp)
        np.minimum.at(at, cell, np.arange(rows, dtype=np.intp))
        first = np.sort(at[at < rows])
        number = np.empty(len(at), dtype=np.intp)
        number[cell[first]] = np.arange(len(first), dtype=np.intp)
        return number[cell], first
    codes, _ = pd.factorize(cell)
    codes = codes.astype(np.intp, copy=False)
    if not len(codes):
        return codes, codes
    seen = np.maximum.accumulate(codes)
    grows = np.empty(len(codes), dtype=bool)
    grows[0] = True
    np.greater(seen[1:], seen[:-1], out=grows[1:])
    return codes, np.flatnonzero(grows)


def _small_range(cell: npt.NDArray[np.integer[Any]]) -> bool:
    """Whether ``cell``'s codes are integers in [0, m) with m at most a quarter of the rows
    (and at most 2^24): a table of m entries costs less than hashing the rows."""
    if cell.dtype.kind not in "iu":
        return False
    low, high = int(cell.min()), int(cell.max())
    return low >= 0 and high < min(len(cell) // 4, 1 << 24)


def ngroups(frame: pd.DataFrame, keys: Sequence[str]) -> npt.NDArray[np.intp]:
    """``frame.groupby(keys, sort=False, observed=True).ngroup()``: each row's group,
    numbered in the order first met, by one code per row (:func:`group_codes`, a text key
    factorized) and hashing, not pandas' grouping. A row without a key is no row of a run
    (:func:`~evidence_bench.runs.data.load_run` refuses it): a
    :class:`~evidence_bench.errors.DataError`."""
    if not len(frame):
        return np.zeros(0, dtype=np.intp)
    cell = group_codes(frame, keys, text=True)
    if cell is not None:
        return first_met(cell)[0]
    if blank := [k for k in keys if frame[k].isna().any()]:
        raise DataError(f"a row has no {blank[0]}")
    numbered = frame.groupby(list(keys), observed=True, sort=False).ngroup()  # (2^62 keys)
    return np.asarray(numbered, dtype=np.intp)


@dataclass(frozen=True, slots=True)
class Summary:
    """Mean of ``n`` values, sample standard deviation, and a Student's t confidence interval."""

    n: int
    mean: float
    std: float
    ci_low: float
    ci_high: float


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def t_intervals(
    n: npt.ArrayLike,
    mean: npt.ArrayLike,
    std: npt.ArrayLike,
    confidence: float = 0.95,
    *,
    spread: npt.ArrayLike | None = None,
) -> tuple[Floats, Floats]:
    """Student's t intervals mean ± t(1 − α/2, n − 1)·std/√n, element-wise, from one
    Student's t quantile call over the distinct n only (a run has few). NaN where n < 2.

    ``spread``: the values are paired differences with this max − min; NaN also where they
    are all equal and non-zero, where t is undefined (:func:`t_test_p_values`): a zero-width
    interval there would claim the certainty its NaN p declines to."""
    _check_confidence(confidence)
    size = np.asarray(n, dtype=np.float64)
    centre = np.asarray(mean, dtype=np.float64)
    deviation = np.asarray(std, dtype=np.float64)
    defined = size >= 2
    if spread is not None:
        defined &= ~_constant_shift(centre, spread)
    distinct, where = np.unique(np.where(defined, size - 1.0, 1.0), return_inverse=True)
    quantile = _t_ppf((1.0 + confidence) / 2.0, distinct)[where.reshape(size.shape)]
    with np.errstate(divide="ignore", invalid="ignore"):
        half = np.where(defined, quantile * deviation / np.sqrt(size), np.nan)
    return centre - half, centre + half


def _constant_shift(mean: npt.ArrayLike, spread: npt.ArrayLike) -> npt.NDArray[np.bool_]:
    """Differences that are all equal (within :data:`TIE`) and not zero: t = mean / 0."""
    return np.asarray(
        (np.asarray(spread, dtype=np.float64) <= TIE)
        & (np.abs(np.asarray(mean, dtype=np.float64)) > TIE)
    )


def summarize(
    values: Sequence[float], confidence: float = 0.95, *, differences: bool = False
) -> Summary:
    """Mean, sample std (ddof=1) and the t-interval mean ± t(1-α/2, n-1)·std/√n.

    ``n == 0`` gives NaNs; ``n == 1`` gives the mean with NaN std and interval.
    ``differences``: the values are paired differences (gains), whose interval is NaN where
    they are all equal and non-zero (:func:`t_intervals`' ``spread``).
    """
    _check_confidence(confidence)
    n = len(values)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    data = np.asarray(values, dtype=np.float64)
    mean = float(data.mean())
    std = float(data.std(ddof=1)) if n > 1 else math.nan
    spread = float(np.ptp(data)) if differences else None
    low, high = t_intervals(n, mean, std, confidence, spread=spread)
    return Summary(n, mean, std, float(low), float(high))


def summarize_groups(
    frame: pd.DataFrame,
    keys: Sequence[str],
    value: str = "value",
    confidence: float = 0.95,
    *,
    differences: bool = False,
) -> pd.DataFrame:
    """:func:`summarize` per group of ``keys``, vectorized and with the same floats: the keys,
    then n, mean, std, ci_low and ci_high, in the order groups first appear.

    The groups of one size form one matrix (a row per group, its values in frame order), and
    numpy's mean and std along its rows add each row as they add the same values alone
    (pairwise summation runs along the contiguous axis), so a group's mean and std are
    :func:`summarize`'s to the last bit. The t quantiles come from one quantile call over
    the distinct n (:func:`t_intervals`). ``differences``: as for :func:`summarize`.
    """
    _check_confidence(confidence)
    code = ngroups(frame, keys).astype(np.int64, copy=False)
    groups = int(code.max()) + 1 if len(code) else 0
    values = frame[value].to_numpy(dtype=np.float64)
    stats = summarize_codes(code, values, groups, confidence, differences=differences)
    first = stats.pop("first")
    out = frame.iloc[first][list(keys)].reset_index(drop=True)
    for name, column in stats.items():
        out[name] = column
    return out


def summarize_codes(
    code: npt.NDArray[np.integer[Any]],
    values: Floats,
    groups: int,
    confidence: float = 0.95,
    *,
    differences: bool = False,
) -> dict[str, npt.NDArray[Any]]:
    """:func:`summarize_groups`' numbers for ``values`` grouped by ``code`` (0 ..
    ``groups`` − 1, every one present): ``n``, ``mean``, ``std``, ``ci_low``, ``ci_high``
    per group, and ``first``, each group's first row; groups as numbered. ``differences``:
    as for :func:`summarize`."""
    _check_confidence(confidence)
    # each group's rows, in frame order, the groups ordered by size (then code): a stable
    # sort of each row's group rank, one permutation (as 16 bits, when the groups fit,
    # numpy sorts it by radix); the groups of one size are then one C-contiguous block,
    # a row per group
    n = np.bincount(code, minlength=groups)
    by_size = np.argsort(n, kind="stable")
    rank = np.empty(groups, dtype=np.int64)
    rank[by_size] = np.arange(groups)
    keys = rank[code]
    if 0 < groups <= 1 << 16:
        keys = keys.astype(np.uint16)
    order = np.argsort(keys, kind="stable")
    del keys
    data = values[order]
    start = np.zeros(groups, dtype=np.int64)
    start[by_size] = np.cumsum(n[by_size]) - n[by_size]
    mean = np.full(groups, np.nan)
    std = np.full(groups, np.nan)
    spread = np.full(groups, np.nan) if differences else None
    sizes, first = np.unique(n[by_size], return_index=True)
    for size, at in zip(sizes.tolist(), first.tolist(), strict=True):
        of_size = by_size[at : at + int(np.count_nonzero(n == size))]
        begin = int(start[of_size[0]])
        rows = data[begin : begin + len(of_size) * size].reshape(len(of_size), size)
        mean[of_size] = rows.mean(axis=1)
        if size > 1:
            std[of_size] = rows.std(axis=1, ddof=1)
        if spread is not None and size > 0:
            spread[of_size] = np.ptp(rows, axis=1)
    low, high = t_intervals(n, mean, std, confidence, spread=spread)
    return {
        "first": order[start],
        "n": n,
        "mean": mean,
        "std": std,
        "ci_low": low,
        "ci_high": high,
    }


def t_test_p_values(
    n: npt.ArrayLike, mean: npt.ArrayLike, std: npt.ArrayLike, spread: npt.ArrayLike
) -> Floats:
    """Two-sided p of the paired t-test (the one-sample t-test of the differences against 0),
    element-wise from each comparison's n, mean and sample std of its differences and their
    ``spread`` (max − min). p = 1 where every difference is zero; NaN where t is undefined
    (n < 2, or all differences equal and non-zero: see the module docstring)."""
    size = np.asarray(n, dtype=np.float64)
    centre = np.asarray(mean, dtype=np.float64)
    sd = np.asarray(std, dtype=np.float64)
    zero = (np.asarray(spread, dtype=np.float64) <= TIE) & (np.abs(centre) <= TIE)
    defined = (size >= 2) & (np.asarray(spread, dtype=np.float64) > TIE)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(defined, centre / (sd / np.sqrt(size)), 0.0)
    p = 2.0 * _t_sf(np.abs(t), np.where(defined, size - 1.0, 1.0))
    return np.where(zero, 1.0, np.where(defined, np.minimum(p, 1.0), np.nan))


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of Student's paired t-test, as :func:`scipy.stats.ttest_rel` gives,
    run on the differences with float noise removed; see :func:`t_test_p_values` for the
    edges (1.0 with no difference, NaN where t is undefined)."""
    diffs = _differences(a, b)
    if not np.any(diffs):
        return 1.0
    if len(diffs) < 2:
        return math.nan
    std = float(diffs.std(ddof=1))
    return float(t_test_p_values(len(diffs), diffs.mean(), std, np.ptp(diffs)))


def sign_flip_p_values(
    diffs: npt.ArrayLike, *, trials: int, seed: int | np.random.Generator
) -> Floats:
    """Two-sided p of a paired randomization (sign-flip) test for each column of ``diffs``
    (n queries × k comparisons), all with the same ``trials`` × n signs.

    Under the null hypothesis each query's pair is exchangeable, so each difference's sign
    is a coin flip (Fisher 1935; Smucker, Allan & Carterette 2007 recommend the test for
    IR). p counts the observed assignment among the trials:
    (1 + #{|Σ s·d| ≥ |Σ d| − n·TIE}) / (1 + trials). Signs come from
    ``numpy.random.default_rng(seed).integers(0, 2, (rows, n))`` in blocks of rows that
    depend on n alone, so a seed gives the same signs whatever else is tested with them.
    """
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    matrix = np.asarray(diffs, dtype=np.float64)
    if matrix.ndim != 2:
        raise ValueError(f"diffs must be an n × k matrix, got shape {matrix.shape}")
    n, k = matrix.shape
    if n == 0:
        return np.ones(k)
    if k > 1:
        # Identical columns have the same p under the same signs: test each once (a sweep's
        # configs often tie, e.g. where no query changed).
        distinct, inverse = _unique_columns(matrix)
        if distinct.shape[1] < k:
            p = sign_flip_p_values(distinct, trials=trials, seed=seed)
            return np.asarray(p[inverse.ravel()], dtype=np.float64)
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    observed = np.abs(matrix.sum(axis=0)) - n * TIE
    extreme = np.zeros(k, dtype=np.int64)
    rows = max(1, BLOCK_CELLS // n)
    done = 0
    while done < trials:
        block = min(rows, trials - done)
        signs = (rng.integers(0, 2, size=(block, n), dtype=np.int8) * 2 - 1).astype(np.float64)
        columns = max(1, BLOCK_CELLS // block)
        for start in range(0, k, columns):
            sums = signs @ matrix[:, start : start + columns]
            np.abs(sums, out=sums)  # in place: one block of sums at the tail's peak, not two
            extreme[start : start + columns] += np.count_nonzero(
                sums >= observed[start : start + columns], axis=0
            )
        done += block
    return (extreme + 1) / (trials + 1)


def _unique_columns(
    matrix: Floats,
) -> tuple[Floats, npt.NDArray[np.intp]]:
    """``np.unique(matrix, axis=1, return_inverse=True)``: the distinct columns in
    lexicographic order (row 0 first, as floats compare), and each column's index among
    them; by one stable lexsort with a key per row, not a sort of the columns as records."""
    if np.isnan(matrix).any():  # no NaN equals another: np.unique's own answer
        distinct, inverse = np.unique(matrix, axis=1, return_inverse=True)
        return distinct, inverse.ravel()
    order = np.lexsort(matrix[::-1])
    ordered = matrix[:, order]
    new = np.empty(len(order), dtype=bool)
    new[:1] = True
    np.any(ordered[:, 1:] != ordered[:, :-1], axis=0, out=new[1:])
    inverse = np.empty(len(order), dtype=np.intp)
    inverse[order] = np.cumsum(new) - 1
    return ordered[:, new], inverse


def randomization_test(
    a: Sequence[float], b: Sequence[float], *, trials: int = 10_000, seed: int = 0
) -> float:
    """Two-sided p-value of a paired randomization test of the mean difference, with signs
    from ``numpy.random.default_rng(seed)``: :func:`sign_flip_p_values` for one comparison."""
    if trials < 1:
        raise ValueError(f"trials must be at least 1, got {trials}")
    diffs = _differences(a, b)
    if not np.any(diffs):
        return 1.0
    return float(sign_flip_p_values(diffs[:, None], trials=trials, seed=seed)[0])


def trials_for(hypotheses: int, floor: int = MIN_TRIALS) -> int:
    """Randomization trials for a Holm family of ``hypotheses``: at least ``floor`` and at
    least 100 per hypothesis. The smallest p a test can give is 1/(trials + 1), so the
    smallest Holm-adjusted one is m/(trials + 1), below 0.01 when trials ≥ 100·m."""
    return max(int(floor), 100 * int(hypotheses))


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
    a: Sequence[float], b: Sequence[float], eps: float = TIE
) -> tuple[int, int, int]:
    """Counts of queries where ``b`` beats ``a`` by more than ``eps``, loses, and ties."""
    _check_pairs(a, b)
    improved = sum(1 for x, y in zip(a, b, strict=True) if y > x + eps)
    degraded = sum(1 for x, y in zip(a, b, strict=True) if y < x - eps)
    return improved, degraded, len(a) - improved - degraded


def _check_pairs(a: Sequence[float], b: Sequence[float]) -> None:
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in length: {len(a)} and {len(b)}")


def _differences(a: Sequence[float], b: Sequence[float]) -> Floats:
    """b - a, with differences within :data:`TIE` set to exactly zero."""
    _check_pairs(a, b)
    diffs = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if not np.all(np.isfinite(diffs)):
        raise ValueError("paired samples must be finite numbers (found NaN or infinity)")
    diffs[np.abs(diffs) <= TIE] = 0.0
    return diffs


def selection_intervals(
    n: npt.ArrayLike,
    mean: npt.ArrayLike,
    std: npt.ArrayLike,
    candidates: int,
    confidence: float = 0.95,
    *,
    spread: npt.ArrayLike | None = None,
) -> tuple[Floats, Floats]:
    """t intervals for a comparison picked from ``candidates`` after looking at them (the
    largest gain of a sweep): each at level 1 − (1 − confidence)/candidates, so the
    candidates' intervals hold all at once with probability at least ``confidence``
    (Bonferroni's inequality; Dunn 1961), and so does the picked one's, whatever picked it.
    ``spread``: as for :func:`t_intervals`."""
    if candidates < 1:
        raise ValueError(f"candidates must be at least 1, got {candidates}")
    _check_confidence(confidence)
    return t_intervals(n, mean, std, 1.0 - (1.0 - confidence) / candidates, spread=spread)


def fieller_intervals(
    n: npt.ArrayLike,
    mean_x: npt.ArrayLike,
    mean_y: npt.ArrayLike,
    var_x: npt.ArrayLike,
    var_y: npt.ArrayLike,
    cov_xy: npt.ArrayLike,
    confidence: float = 0.95,
) -> tuple[Floats, Floats, Floats]:
    """The ratio of two paired means ρ = mean(x) / mean(y) and Fieller's interval for it,
    element-wise from each pair's n, means, sample variances and covariance (ddof=1).

    Fieller (1954, "Some problems in interval estimation", JRSS B; for paired data Franz
    2007, "Ratios: a short guide to confidence limits and proper use"): the ρ for which
    mean(x) − ρ·mean(y) is within t(1 − α/2, n − 1) standard errors of 0, i.e. the roots of
    (b² − t²v_yy)ρ² − 2(ab − t²v_xy)ρ + (a² − t²v_xx) = 0 with a, b the means and v the
    (co)variances of the means (sample ones over n). The interval is bounded only when the
    denominator's mean is itself significantly non-zero (b² > t²v_yy); otherwise it is the
    whole line or two half-lines, reported as NaN bounds, as is n < 2. ρ is NaN where
    mean(y) is 0.
    """
    _check_confidence(confidence)
    size = np.asarray(n, dtype=np.float64)
    a = np.asarray(mean_x, dtype=np.float64)
    b = np.asarray(mean_y, dtype=np.float64)
    defined = size >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        v_xx = np.asarray(var_x, dtype=np.float64) / size
        v_yy = np.asarray(var_y, dtype=np.float64) / size
        v_xy = np.asarray(cov_xy, dtype=np.float64) / size
        t2 = _t_ppf((1.0 + confidence) / 2.0, np.where(defined, size - 1.0, 1.0)) ** 2
        ratio = np.where(b != 0.0, a / b, np.nan)
        quad = b * b - t2 * v_yy
        half = b * a - t2 * v_xy
        const = a * a - t2 * v_xx
        root = np.sqrt(np.maximum(half * half - quad * const, 0.0))
        bounded = defined & (quad > 0.0)
        low = np.where(bounded, (half - root) / quad, np.nan)
        high = np.where(bounded, (half + root) / quad, np.nan)
    return ratio, low, high
