"""Summaries and paired tests, against scipy and against examples worked by hand."""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

import evidence_bench.evaluation.statistics as statistics_module
from evidence_bench.evaluation.statistics import (
    TIE,
    Summary,
    holm,
    improved_degraded,
    paired_t_test,
    randomization_test,
    selection_intervals,
    sign_flip_p_values,
    summarize,
    summarize_groups,
    t_intervals,
    t_test_p_values,
    trials_for,
)


@pytest.fixture
def paired_scores() -> tuple[list[float], list[float]]:
    rng = np.random.default_rng(42)
    a = rng.random(225)
    b = np.clip(a + rng.normal(0.02, 0.15, 225), 0.0, 1.0)
    return a.tolist(), b.tolist()


# --- summarize -----------------------------------------------------------------------------


def test_summarize_by_hand() -> None:
    # values 1, 2, 3, 4: mean 2.5; sample variance (2.25+0.25+0.25+2.25)/3 = 5/3.
    # 95% CI: 2.5 ± t(0.975, 3) · sqrt(5/3)/2, with t(0.975, 3) = 3.182446305 (t tables).
    summary = summarize([1.0, 2.0, 3.0, 4.0])
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2
    assert summary.n == 4
    assert summary.mean == pytest.approx(2.5)
    assert summary.std == pytest.approx(math.sqrt(5 / 3))
    assert summary.ci_low == pytest.approx(2.5 - half)
    assert summary.ci_high == pytest.approx(2.5 + half)


def test_summarize_matches_scipy(paired_scores: tuple[list[float], list[float]]) -> None:
    values = paired_scores[0]
    for confidence in (0.9, 0.95, 0.99):
        summary = summarize(values, confidence)
        low, high = stats.t.interval(
            confidence, len(values) - 1, loc=np.mean(values), scale=stats.sem(values)
        )
        assert summary.std == pytest.approx(np.std(values, ddof=1), rel=1e-12)
        assert (summary.ci_low, summary.ci_high) == pytest.approx((low, high), rel=1e-12)


def test_summarize_small_samples() -> None:
    empty = summarize([])
    assert empty.n == 0
    assert all(math.isnan(x) for x in (empty.mean, empty.std, empty.ci_low, empty.ci_high))
    # One value: a mean, but no spread and no interval (not a zero-width one).
    one = summarize([0.25])
    assert (one.n, one.mean) == (1, 0.25)
    assert math.isnan(one.std) and math.isnan(one.ci_low) and math.isnan(one.ci_high)
    # Three equal values: a sample std of 0, so the interval is the mean itself.
    assert summarize([0.5, 0.5, 0.5]) == Summary(3, 0.5, 0.0, 0.5, 0.5)


def test_t_intervals_are_vectorized_by_hand() -> None:
    # n = 2, std 0.1: 0.3 ± t(0.975, 1)·0.1/√2, t(0.975, 1) = 12.706 (t tables);
    # n = 10, std 0.2: 0.1 ± t(0.975, 9)·0.2/√10, t(0.975, 9) = 2.262; n = 1: no interval.
    low, high = t_intervals([2, 10, 1], [0.3, 0.1, 0.7], [0.1, 0.2, math.nan])
    assert low[:2] == pytest.approx(
        [0.3 - 12.7062 * 0.1 / math.sqrt(2), 0.1 - 2.2622 * 0.2 / math.sqrt(10)], abs=1e-4
    )
    assert high[:2] == pytest.approx(
        [0.3 + 12.7062 * 0.1 / math.sqrt(2), 0.1 + 2.2622 * 0.2 / math.sqrt(10)], abs=1e-4
    )
    assert math.isnan(low[2]) and math.isnan(high[2])


def test_t_intervals_of_differences_all_equal_and_non_zero_are_undefined() -> None:
    # Given the differences' spread: +0.2 on each of 3 queries has std 0 but no t (its p is
    # NaN), so no interval either; all zero is "no difference", [0, 0] as its p is 1; a
    # spread of 0.2 (std 0.1, n = 3) is the usual 0.1 ± t(0.975, 2)·0.1/√3, t = 4.3027.
    low, high = t_intervals([3, 3, 3], [0.2, 0.0, 0.1], [0.0, 0.0, 0.1], spread=[0.0, 0.0, 0.2])
    assert math.isnan(low[0]) and math.isnan(high[0])
    assert (low[1], high[1]) == (0.0, 0.0)
    half = 4.3027 * 0.1 / math.sqrt(3)
    assert (low[2], high[2]) == pytest.approx((0.1 - half, 0.1 + half), abs=1e-4)
    # the selection-adjusted interval follows it
    low, high = selection_intervals([3, 3], [0.2, 0.1], [0.0, 0.1], 4, spread=[0.0, 0.2])
    assert math.isnan(low[0]) and not math.isnan(low[1])
    # without a spread (scores, not differences) equal values keep the mean itself
    assert t_intervals([3], [0.2], [0.0])[0][0] == 0.2
    # summarize and summarize_groups of differences find the spread themselves
    gains = summarize([0.2, 0.2, 0.2], differences=True)
    assert gains.mean == pytest.approx(0.2) and math.isnan(gains.ci_low)
    assert math.isnan(gains.ci_high)
    none = summarize([0.0, 0.0], differences=True)  # no difference at all: [0, 0], p = 1
    assert (none.ci_low, none.ci_high) == (0.0, 0.0)
    assert summarize([0.5, 0.5, 0.5]) == Summary(3, 0.5, 0.0, 0.5, 0.5)  # scores, as before
    frame = pd.DataFrame({"k": ["a", "a", "a", "b", "b"], "gain": [0.2, 0.2, 0.2, 0.1, 0.3]})
    out = summarize_groups(frame, ["k"], "gain", differences=True).set_index("k")
    assert math.isnan(out.loc["a", "ci_low"])
    half = 12.7062 * math.sqrt(0.02) / math.sqrt(2)  # b: sd 0.1414, t(0.975, 1) = 12.706
    assert out.loc["b", "ci_low"] == pytest.approx(0.2 - half, abs=1e-4)


def test_summarize_groups_matches_summarize() -> None:
    frame = pd.DataFrame({"k": ["a", "a", "a", "a", "b"], "value": [1.0, 2.0, 3.0, 4.0, 9.0]})
    out = summarize_groups(frame, ["k"]).set_index("k")
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2  # as in test_summarize_by_hand
    assert out.loc["a", "n"] == 4 and out.loc["a", "mean"] == pytest.approx(2.5)
    assert out.loc["a", "ci_low"] == pytest.approx(2.5 - half)
    assert out.loc["b", "n"] == 1 and math.isnan(out.loc["b", "ci_low"])


def _numpy_summary(values: np.ndarray) -> tuple[float, float, float, float]:
    """mean and sample std as numpy gives them for the values alone, in their order, and
    the Student's t 95% interval from scipy.stats.t (NaN for one value)."""
    mean, n = float(np.mean(values)), len(values)
    if n < 2:
        return mean, math.nan, math.nan, math.nan
    std = float(np.std(values, ddof=1))
    half = stats.t.ppf(0.975, n - 1) * std / math.sqrt(n)
    return mean, std, mean - half, mean + half


@pytest.mark.parametrize("size", [1, 2, 7, 8, 9, 127, 128, 129, 225, 300])
def test_summarize_groups_gives_numpys_floats_exactly(size: int) -> None:
    # Bit for bit, across numpy's pairwise-summation block sizes (8, 128): summary.csv must
    # not move when it is computed per group size instead of per group.
    rng = np.random.default_rng(size)
    values = rng.random((5, size))
    frame = pd.DataFrame(
        {"k": np.repeat([f"g{i}" for i in range(5)], size), "value": values.ravel()}
    ).sample(frac=1.0, random_state=1)  # groups interleaved; each keeps its row order
    out = summarize_groups(frame, ["k"]).set_index("k")
    for key, group in frame.groupby("k")["value"]:
        mean, std, low, high = _numpy_summary(group.to_numpy())
        row = out.loc[key]
        assert int(row["n"]) == size and row["mean"] == mean, key
        if size == 1:
            assert math.isnan(row["std"]) and math.isnan(row["ci_low"]), key
        else:
            assert row["std"] == std, key
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), rel=1e-12)


def test_t_intervals_call_t_ppf_once_per_distinct_n(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    stdtrit = special.stdtrit

    def counting(df: np.ndarray, q: float) -> np.ndarray:
        calls.append(np.size(df))
        return np.asarray(stdtrit(df, q))

    monkeypatch.setattr(special, "stdtrit", counting)
    low, _ = t_intervals([10, 225, 10, 1, 225] * 1000, [0.5] * 5000, [0.1] * 5000)
    assert calls == [3]  # one call; df 1 (a placeholder for n = 1), 9 and 224
    # t(0.975, 9) = 2.2622 (t tables)
    assert low[0] == pytest.approx(0.5 - 2.2622 * 0.1 / math.sqrt(10), abs=1e-4)
    assert math.isnan(low[3])


def test_t_quantiles_and_p_values_are_scipy_stats_t_to_the_bit() -> None:
    # The intervals and t-test p-values use scipy.special (no scipy.stats import); they
    # must be exactly what scipy.stats.t gives, for every df a run can have.
    df = np.arange(1, 3000, dtype=np.float64)
    for confidence in (0.95, 0.99, 1 - 0.05 / 96):
        q = (1 + confidence) / 2
        assert np.array_equal(statistics_module._t_ppf(q, df), stats.t.ppf(q, df))
    rng = np.random.default_rng(7)
    size = rng.integers(2, 300, 5000).astype(np.float64)
    mean, std = rng.normal(0.0, 0.05, 5000), rng.uniform(0.01, 0.2, 5000)
    t = mean / (std / np.sqrt(size))
    expected = np.minimum(2.0 * stats.t.sf(np.abs(t), size - 1.0), 1.0)
    assert np.array_equal(t_test_p_values(size, mean, std, np.ones(5000)), expected)


def test_selection_intervals_are_bonferroni_widened() -> None:
    # Picked from 10 candidates: each interval at 1 − 0.05/10 = 99.5%; n = 10 gives
    # t(0.9975, 9) = 3.690 (t tables) instead of t(0.975, 9) = 2.262.
    low, high = selection_intervals([10], [0.05], [0.02], candidates=10)
    half = 3.6897 * 0.02 / math.sqrt(10)
    assert (low[0], high[0]) == pytest.approx((0.05 - half, 0.05 + half), abs=1e-5)
    plain = t_intervals([10], [0.05], [0.02])
    one = selection_intervals([10], [0.05], [0.02], candidates=1)
    assert (plain[0][0], plain[1][0]) == (one[0][0], one[1][0])  # one candidate: no widening
    with pytest.raises(ValueError, match="candidates must be at least 1"):
        selection_intervals([10], [0.05], [0.02], candidates=0)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 95.0, -0.5])
def test_summarize_refuses_bad_confidence(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence must be in"):
        summarize([1.0, 2.0], confidence)


# --- paired t-test -------------------------------------------------------------------------


def test_paired_t_test_matches_scipy(paired_scores: tuple[list[float], list[float]]) -> None:
    a, b = paired_scores
    assert paired_t_test(a, b) == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-10)
    assert paired_t_test(a, b) == paired_t_test(b, a)


def test_paired_t_test_by_hand() -> None:
    # differences 1, 2, 3: mean 2, sd 1, t = 2 / (1/sqrt(3)) = 2·sqrt(3) with 2 df;
    # two-sided p = 1 - |t| / sqrt(2 + t²) for 2 df (closed form) = 1 - 2√3/√14.
    p = paired_t_test([0.0, 0.0, 0.0], [1.0, 2.0, 3.0])
    assert p == pytest.approx(1 - 2 * math.sqrt(3) / math.sqrt(14), rel=1e-12)


def test_paired_t_test_edges_have_defined_answers() -> None:
    # No difference at all: p = 1 (t's 0/0 read as "no difference").
    assert paired_t_test([0.1, 0.2, 0.3], [0.1, 0.2, 0.3]) == 1.0
    assert paired_t_test([0.3, 0.5], [0.1 + 0.2, 0.5]) == 1.0  # float noise is no difference
    assert paired_t_test([], []) == 1.0
    # One pair: no degrees of freedom, t is undefined.
    assert math.isnan(paired_t_test([0.5], [0.9]))
    # Every query gained 0.1: s = 0, t = 0.1/(0/√n) has no value; its limit p = 0 would be
    # certainty from two queries. scipy gives ~1e-32 here from float noise alone.
    assert math.isnan(paired_t_test([0.1, 0.2], [0.2, 0.3]))
    assert math.isnan(paired_t_test([0.1, 0.2, 0.3], [0.2, 0.3, 0.4]))


def test_t_test_p_values_vectorized_match_scipy(
    paired_scores: tuple[list[float], list[float]],
) -> None:
    a, b = np.asarray(paired_scores[0]), np.asarray(paired_scores[1])
    diffs = [b[:225] - a[:225], b[:40] - a[:40], b[100:103] - a[100:103]]
    p = t_test_p_values(
        [len(d) for d in diffs],
        [d.mean() for d in diffs],
        [d.std(ddof=1) for d in diffs],
        [np.ptp(d) for d in diffs],
    )
    expected = [stats.ttest_1samp(d, 0.0).pvalue for d in diffs]
    assert p == pytest.approx(expected, rel=1e-10)
    # The edges, element-wise: all zero -> 1; constant non-zero -> NaN; one pair -> NaN.
    edges = t_test_p_values([3, 3, 1], [0.0, 0.1, 0.2], [0.0, 0.0, math.nan], [0.0, 0.0, 0.0])
    assert edges[0] == 1.0 and math.isnan(edges[1]) and math.isnan(edges[2])


def test_paired_tests_refuse_mismatched_or_nan() -> None:
    with pytest.raises(ValueError, match="differ in length: 2 and 3"):
        paired_t_test([0.1, 0.2], [0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="finite"):
        randomization_test([0.1, math.nan], [0.1, 0.2])


# --- randomization test --------------------------------------------------------------------


def test_randomization_identical_inputs() -> None:
    values = [0.1, 0.5, 0.9, 0.3]
    assert randomization_test(values, values) == 1.0
    assert randomization_test([], []) == 1.0
    # By definition too: every assignment of signs to zeros is as extreme, (1 + T)/(1 + T).
    assert sign_flip_p_values(np.zeros((4, 1)), trials=50, seed=0)[0] == 1.0


def test_randomization_one_pair_is_never_significant() -> None:
    # n = 1: the two assignments, +d and −d, are both as extreme as d: exact p = 2/2 = 1.
    assert randomization_test([0.2], [0.9], trials=100) == 1.0


@pytest.mark.parametrize(("n", "exact"), [(2, 2 / 4), (3, 2 / 8), (4, 2 / 16)])
def test_randomization_all_differences_equal_by_definition(n: int, exact: float) -> None:
    """Every query gained 0.1: of the 2^n sign assignments only all-plus and all-minus
    reach |mean| = 0.1, so the exact p is 2/2^n; the sampled p estimates it, not 0."""
    trials = 40_000
    p = randomization_test([0.3] * n, [0.4] * n, trials=trials, seed=5)
    # (1 + count)/(1 + trials) with count ~ Binomial(trials, exact): 5 standard errors.
    assert p == pytest.approx(exact, abs=5 * math.sqrt(exact * (1 - exact) / trials))


def test_randomization_large_consistent_shift() -> None:
    rng = np.random.default_rng(3)
    a = rng.random(50)
    b = a + 0.1 + rng.normal(0, 0.02, 50)
    p = randomization_test(a.tolist(), b.tolist())
    assert p < 0.01
    assert p == 1 / 10_001  # no sign assignment is as extreme as the observed one


def test_randomization_is_deterministic_for_a_seed(
    paired_scores: tuple[list[float], list[float]],
) -> None:
    a, b = paired_scores
    p = randomization_test(a, b, seed=11)
    assert randomization_test(a, b, seed=11) == p
    assert randomization_test(b, a, seed=11) == p  # two-sided: symmetric
    assert {randomization_test(a, b, seed=s) for s in range(5)} != {p}  # seeds do differ


def test_randomization_agrees_with_exact_enumeration() -> None:
    # 8 pairs: all 256 sign assignments can be enumerated; the Monte Carlo p must be close.
    diffs = np.array([0.3, -0.1, 0.25, 0.05, 0.2, -0.15, 0.1, 0.4])
    signs = np.array([[1 if (mask >> i) & 1 else -1 for i in range(8)] for mask in range(256)])
    exact = np.mean(np.abs(signs @ diffs) >= abs(diffs.sum()) - 1e-12)
    p = randomization_test([0.0] * 8, diffs.tolist(), trials=20_000, seed=1)
    assert p == pytest.approx(exact, abs=0.01)


def test_randomization_agrees_with_t_test_on_normal_data(
    paired_scores: tuple[list[float], list[float]],
) -> None:
    a, b = paired_scores
    assert randomization_test(a, b) == pytest.approx(paired_t_test(a, b), abs=0.02)


def test_randomization_is_fast() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.random(225).tolist(), rng.random(225).tolist()
    start = time.perf_counter()
    randomization_test(a, b, trials=10_000)
    assert time.perf_counter() - start < 1.0


def test_randomization_refuses_no_trials() -> None:
    with pytest.raises(ValueError, match="trials must be at least 1"):
        randomization_test([0.1], [0.2], trials=0)
    with pytest.raises(ValueError, match="trials must be at least 1"):
        sign_flip_p_values(np.ones((2, 1)), trials=0, seed=0)


def test_sign_flip_columns_share_signs_and_stay_independent_of_each_other(
    paired_scores: tuple[list[float], list[float]],
) -> None:
    """One matrix product for many tests of the same size: a column's p is the p it gets
    alone, with the same seed, whatever the other columns hold."""
    a, b = np.asarray(paired_scores[0][:50]), np.asarray(paired_scores[1][:50])
    d = b - a
    matrix = np.column_stack([d, d[::-1] * 0.5, np.zeros(50), d + 0.2])
    together = sign_flip_p_values(matrix, trials=3000, seed=9)
    alone = [sign_flip_p_values(matrix[:, [j]], trials=3000, seed=9)[0] for j in range(4)]
    assert list(together) == alone
    assert together[2] == 1.0 and together[3] == 1 / 3001
    assert together[0] == randomization_test(a.tolist(), b.tolist(), trials=3000, seed=9)
    assert list(sign_flip_p_values(matrix, trials=3000, seed=10)) != alone


def test_trials_scale_with_the_holm_family() -> None:
    # 5000 trials serve up to 50 hypotheses: 50/5001 < 0.01; 60 need 6000: 60/6001 < 0.01.
    assert trials_for(1) == 5000 and trials_for(50) == 5000 and trials_for(60) == 6000
    assert trials_for(3, floor=20) == 300
    for m in (1, 7, 49, 50, 51, 500):
        trials = trials_for(m, floor=1)
        assert m / (trials + 1) < 0.01  # the smallest Holm-adjusted p a family can reach


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30),
    st.integers(1, 200),
)
def test_property_p_values_are_valid(pairs: list[tuple[float, float]], trials: int) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    p_t = paired_t_test(a, b)
    diffs = [y - x for x, y in pairs]
    undefined = len(diffs) == 1 or max(diffs) - min(diffs) <= TIE  # see the edge cases above
    assert 0.0 <= p_t <= 1.0 or (math.isnan(p_t) and undefined)
    assert 1 / (trials + 1) <= randomization_test(a, b, trials=trials) <= 1.0


# --- Holm and win/loss counts --------------------------------------------------------------


def test_holm_by_hand() -> None:
    # sorted: 0.01·3 = 0.03; 0.03·2 = 0.06; 0.04·1 = 0.04 -> raised to 0.06 (monotone).
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_holm_caps_at_one_and_keeps_order() -> None:
    # sorted: 0.2·4 = 0.8; 0.3·3 = 0.9; 0.5·2 = 1.0; 0.6·1 = 0.6 -> 1.0.
    assert holm([0.6, 0.2, 0.5, 0.3]) == pytest.approx([1.0, 0.8, 1.0, 0.9])
    assert holm([]) == []
    assert holm([0.04]) == [0.04]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 1), max_size=20))
def test_property_holm_is_bounded_and_monotone(pvalues: list[float]) -> None:
    adjusted = holm(pvalues)
    assert all(p <= q <= 1.0 for p, q in zip(pvalues, adjusted, strict=True))
    order = sorted(range(len(pvalues)), key=pvalues.__getitem__)
    ranked = [adjusted[i] for i in order]
    assert ranked == sorted(ranked)


def test_holm_refuses_invalid_p() -> None:
    with pytest.raises(ValueError, match="p-values must be in"):
        holm([0.1, 1.5])


def test_improved_degraded() -> None:
    assert TIE == 1e-9  # the one tie tolerance: float noise is a tie, 1e-6 is not
    assert improved_degraded([0.3], [0.3 + 1e-6]) == (1, 0, 0)
    a = [0.5, 0.5, 0.5, 0.3 + 1e-12, 0.0]
    b = [0.6, 0.4, 0.5, 0.3, 0.0]
    assert improved_degraded(a, b) == (1, 1, 3)
    assert improved_degraded(b, a) == (1, 1, 3)
    assert improved_degraded(a, b, eps=0.2) == (0, 0, 5)
    with pytest.raises(ValueError, match="differ in length"):
        improved_degraded([0.1], [])


def test_identical_columns_are_tested_once_with_the_same_p() -> None:
    d1 = np.array([0.25, -0.5, 0.125, 0.375, 0.0, 0.5])
    d2 = np.array([0.25, 0.5, 0.125, 0.375, 0.25, 0.5])
    zero = np.zeros(6)
    batch = sign_flip_p_values(np.stack([d1, d2, d1, zero, d2], axis=1), trials=300, seed=11)
    alone = [sign_flip_p_values(d[:, None], trials=300, seed=11)[0] for d in (d1, d2, zero)]
    assert batch.tolist() == [alone[0], alone[1], alone[0], alone[2], alone[1]]
    assert alone[2] == 1.0  # no difference: every assignment is as extreme


def test_unique_columns_is_numpy_unique_along_columns() -> None:
    """The sign-flip test's distinct columns: np.unique(axis=1)'s, order and inverse alike,
    without sorting columns as records (NaN columns: np.unique's own answer)."""
    from evidence_bench.evaluation.statistics import _unique_columns

    rng = np.random.default_rng(0)
    for trial in range(200):
        n, k = int(rng.integers(1, 30)), int(rng.integers(2, 60))
        values = [0.0, 0.1, -0.2, 0.3, 1e-12, math.nan if trial % 7 == 0 else 0.5]
        base = rng.choice(values, size=(n, max(1, k // 3)))
        matrix = base[:, rng.integers(0, base.shape[1], k)]
        expected, where = np.unique(matrix, axis=1, return_inverse=True)
        distinct, inverse = _unique_columns(matrix)
        assert np.array_equal(distinct, expected, equal_nan=True)
        assert inverse.tolist() == where.ravel().tolist()
