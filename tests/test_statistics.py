"""Summaries and paired tests, against scipy and against examples worked by hand."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from evidence_bench.evaluation.statistics import (
    Summary,
    holm,
    improved_degraded,
    paired_t_test,
    randomization_test,
    summarize,
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
    assert summarize([0.25]) == Summary(1, 0.25, 0.0, 0.25, 0.25)
    assert summarize([0.5, 0.5, 0.5]) == Summary(3, 0.5, 0.0, 0.5, 0.5)


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


def test_paired_t_test_degenerate_cases_never_nan() -> None:
    assert paired_t_test([0.1, 0.2, 0.3], [0.1, 0.2, 0.3]) == 1.0
    assert paired_t_test([0.3, 0.5], [0.1 + 0.2, 0.5]) == 1.0  # float noise is no difference
    assert paired_t_test([0.5], [0.9]) == 1.0  # one pair: nothing to test
    assert paired_t_test([], []) == 1.0
    assert paired_t_test([0.1, 0.2], [0.2, 0.3]) == 0.0  # constant shift: t is infinite


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


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30),
    st.integers(1, 200),
)
def test_property_p_values_are_valid(pairs: list[tuple[float, float]], trials: int) -> None:
    a, b = [x for x, _ in pairs], [y for _, y in pairs]
    assert 0.0 <= paired_t_test(a, b) <= 1.0
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
    a = [0.5, 0.5, 0.5, 0.3 + 1e-12, 0.0]
    b = [0.6, 0.4, 0.5, 0.3, 0.0]
    assert improved_degraded(a, b) == (1, 1, 3)
    assert improved_degraded(b, a) == (1, 1, 3)
    assert improved_degraded(a, b, eps=0.2) == (0, 0, 5)
    with pytest.raises(ValueError, match="differ in length"):
        improved_degraded([0.1], [])
