"""A user's gain as a share of the oracle's: Fieller's interval worked by hand, and the
pairing of per-query gains."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evidence_bench.evaluation.oracle_share import SHARE_COLUMNS, oracle_share
from evidence_bench.evaluation.statistics import fieller_intervals

# t(0.975, 2), from the t table: 4.303
T2 = 4.302652729911275


def fieller(x: list[float], y: list[float]) -> tuple[float, float, float]:
    n = len(x)
    cov = float(np.cov(x, y, ddof=1)[0, 1]) if n > 1 else math.nan
    var_x = float(np.var(x, ddof=1)) if n > 1 else math.nan
    var_y = float(np.var(y, ddof=1)) if n > 1 else math.nan
    ratio, low, high = fieller_intervals(n, np.mean(x), np.mean(y), var_x, var_y, cov)
    return float(ratio), float(low), float(high)


def test_a_constant_denominator_gives_the_t_interval_divided_by_it() -> None:
    # x = 1, 2, 3: mean 2, sd 1; y = 2 always. Fieller reduces to (2 ± t·1/√3) / 2.
    ratio, low, high = fieller([1.0, 2.0, 3.0], [2.0, 2.0, 2.0])
    half = T2 / math.sqrt(3.0)
    assert (ratio, low, high) == pytest.approx((1.0, (2 - half) / 2, (2 + half) / 2))
    assert (low, high) == pytest.approx((-0.24207, 2.24207), abs=1e-5)


def test_a_numerator_proportional_to_the_denominator_has_no_doubt_about_the_ratio() -> None:
    # x = y / 2 query by query: x − ρy has no variance at ρ = 1/2, so the interval is {1/2}.
    y = [1.0, 1.1, 0.9, 1.0]
    ratio, low, high = fieller([v / 2 for v in y], y)
    assert (ratio, low, high) == pytest.approx((0.5, 0.5, 0.5), abs=1e-6)


def test_the_bounds_solve_fiellers_equation() -> None:
    x = [0.10, 0.05, 0.20, 0.00, 0.12, 0.08, 0.15]
    y = [0.20, 0.10, 0.25, 0.05, 0.18, 0.15, 0.22]
    ratio, low, high = fieller(x, y)
    n = len(x)
    a, b = np.mean(x), np.mean(y)
    v = np.cov(x, y, ddof=1) / n
    t2 = stats.t.ppf(0.975, n - 1) ** 2
    for rho in (low, high):
        assert (a - rho * b) ** 2 == pytest.approx(
            t2 * (v[0, 0] - 2 * rho * v[0, 1] + rho**2 * v[1, 1])
        )
    assert ratio == pytest.approx(a / b)
    assert low < ratio < high


@pytest.mark.parametrize(
    ("x", "y"),
    [
        ([0.1, 0.2, 0.0], [0.1, -0.1, 0.0]),  # the oracle gained nothing significant
        ([0.1], [0.2]),  # one query: no interval
    ],
)
def test_an_interval_is_unbounded_where_the_oracle_gain_is_not_significant(
    x: list[float], y: list[float]
) -> None:
    _, low, high = fieller(x, y)
    assert math.isnan(low) and math.isnan(high)


def rows(policy: str, gains: dict[str, float], *, control_only: tuple[str, ...] = ()) -> list:
    out = []
    for query_id, gain in gains.items():
        out.append(("c00", policy, 1, "control", "residual", "nDCG@10", query_id, 0.3))
        out.append(("c00", policy, 1, "rerank", "residual", "nDCG@10", query_id, 0.3 + gain))
    for query_id in control_only:
        out.append(("c00", policy, 1, "control", "residual", "nDCG@10", query_id, 0.3))
    out.append(("c00", policy, 0, "control", "residual", "nDCG@10", "q1", 0.3))
    return out


def test_the_share_pairs_each_users_gain_with_the_oracles_on_the_queries_both_keep() -> None:
    records = [
        *rows("oracle", {"q1": 0.2, "q2": 0.2, "q3": 0.2, "q4": 0.5}),  # q4: only the oracle
        *rows("pbm", {"q1": 0.1, "q2": 0.2, "q3": 0.0}, control_only=("q4",)),
    ]
    columns = ["config_id", "policy", "round", "stage", "eval_mode", "measure", "query_id"]
    per_query = pd.DataFrame(records, columns=[*columns, "value"])
    share = oracle_share(per_query)
    assert list(share.columns) == SHARE_COLUMNS
    assert len(share) == 1
    row = share.iloc[0]
    assert (row["policy"], row["stage"], row["round"], row["n"]) == ("pbm", "rerank", 1, 3)
    half = T2 * 0.1 / math.sqrt(3.0)
    assert (row["gain"], row["oracle_gain"]) == pytest.approx((0.1, 0.2))
    assert (row["share"], row["share_ci_low"], row["share_ci_high"]) == pytest.approx(
        (0.5, (0.1 - half) / 0.2, (0.1 + half) / 0.2)
    )
    assert oracle_share(per_query[per_query["policy"] == "pbm"]).empty
    assert oracle_share(per_query, eval_modes=["frozen"]).empty
