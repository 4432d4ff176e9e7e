"""The parent's last steps by codes (issue 13): groups numbered as first met by hashing,
summaries from codes, values stored to ten digits; the answers the sorting versions gave."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evidence_bench.errors import DataError
from evidence_bench.evaluation.comparisons import _holm, common_queries
from evidence_bench.evaluation.statistics import first_met, summarize_codes
from evidence_bench.evaluation.validity import kendall_tau_b
from evidence_bench.experiment.run import _excluded
from evidence_bench.runs.store import PER_QUERY_COLUMNS, as_stored


def test_first_met_numbers_groups_in_the_order_met() -> None:
    code, first = first_met(np.array([5, 3, 5, 7, 3, 7, 9], dtype=np.int64))
    assert code.tolist() == [0, 1, 0, 2, 1, 2, 3]
    assert first.tolist() == [0, 1, 3, 6]
    empty = first_met(np.array([], dtype=np.int64))
    assert [a.tolist() for a in empty] == [[], []]


def test_first_met_agrees_with_numpy_unique() -> None:
    cell = np.random.default_rng(3).integers(0, 500, 20_000)
    code, first = first_met(cell)
    unique, index, inverse = np.unique(cell, return_index=True, return_inverse=True)
    assert sorted(first.tolist()) == first.tolist() == np.sort(index).tolist()
    assert (cell[first][code] == cell).all()  # each row's group holds its value
    assert len(first) == len(unique)
    assert (np.argsort(np.argsort(index))[inverse] == code).all()


def test_summarize_codes_per_group_against_scipy() -> None:
    values = np.array([0.5, 0.25, 1.0, 0.75, 0.0, 0.5])
    code = np.array([0, 1, 0, 2, 1, 0])
    stats_ = summarize_codes(code, values, 3)
    assert stats_["first"].tolist() == [0, 1, 3]
    assert stats_["n"].tolist() == [3, 2, 1]

    def stats_of(group: int) -> tuple[float, ...]:
        return tuple(float(stats_[name][group]) for name in ("mean", "std", "ci_low", "ci_high"))

    for group, members in enumerate(([0.5, 1.0, 0.5], [0.25, 0.0])):  # against scipy.stats
        data = np.array(members)
        low, high = stats.t.interval(0.95, len(data) - 1, data.mean(), stats.sem(data))
        assert stats_of(group) == pytest.approx((data.mean(), data.std(ddof=1), low, high))
    assert math.isnan(stats_["std"][2]) and math.isnan(stats_["ci_low"][2])  # one value
    # by hand: group 0 has mean 2/3 and sample std sqrt(1/12)
    assert stats_["mean"][0] == pytest.approx(2 / 3)
    assert stats_["std"][0] == pytest.approx(math.sqrt(1 / 12))


def test_as_stored_rounds_each_value_to_ten_digits() -> None:
    scores = pd.DataFrame({"value": [1 / 3, 2 / 3, 1 / 3, float("nan"), 0.1 + 0.2, -0.0, 0.0]})
    stored = as_stored(scores)["value"].tolist()
    assert stored[:3] == [0.3333333333, 0.6666666667, 0.3333333333]
    assert math.isnan(stored[3])
    assert stored[4] == 0.3
    assert stored[5:] == [0.0, 0.0]
    without_signed_zero = as_stored(scores.iloc[:5])["value"].tolist()
    assert without_signed_zero[:3] == stored[:3] and without_signed_zero[4] == 0.3


def test_excluded_counts_each_cells_missing_queries() -> None:
    rows = [
        ("c00", "oracle", q, r, stage, "residual", "AP", 0.5)
        for q in ("1", "2", "3")
        for r, stage in ((0, "initial"), (1, "initial"), (1, "rerank"))
        if not (r == 1 and q == "3") and not (stage == "rerank" and q == "2")
    ]
    frame = pd.DataFrame(
        rows,
        columns=list(PER_QUERY_COLUMNS),
    )
    for column in ("config_id", "policy", "query_id", "stage", "eval_mode", "measure"):
        frame[column] = frame[column].astype("category")
    frame["round"] = frame["round"].astype("int16")
    assert _excluded(frame, 3) == {
        "c00|oracle|1|initial|residual": 1,
        "c00|oracle|1|rerank|residual": 2,
    }
    assert _excluded(frame.astype({"query_id": str}), 3) == _excluded(frame, 3)


def test_holm_adjusts_each_family_apart() -> None:
    table = pd.DataFrame(
        {
            "policy": ["oracle"] * 4 + ["noisy"],
            "round": [1] * 5,
            "eval_mode": ["residual"] * 5,
            "measure": ["nDCG@10"] * 5,
            "stage": ["rerank"] * 5,
            "reference": ["control"] * 5,
            "p": [0.01, 0.04, float("nan"), 0.03, 0.5],
        }
    )
    # by hand (Holm 1979), the oracle's family of three: 0.01·3, max(0.03·2, 0.03),
    # max(0.04·1, 0.06); the untested row stays NaN; the noisy family of one keeps its p
    got = _holm(table, "p").tolist()
    assert got[:2] == [0.03, 0.06] and math.isnan(got[2]) and got[3:] == [0.06, 0.5]


def test_kendall_tau_b_over_every_pair_at_once() -> None:
    # one discordant pair of three (scipy.stats.kendalltau gives 1/3)
    assert kendall_tau_b([1.0, 2.0, 3.0], [1.0, 3.0, 2.0]) == pytest.approx(1 / 3)
    # a tie in y (within TIE): tau-b = (2 - 0) / sqrt(3 * 2) (scipy: 0.8164965809)
    assert kendall_tau_b([1.0, 2.0, 3.0], [1.0, 2.0, 2.0 + 1e-12]) == pytest.approx(0.8164965809)
    assert math.isnan(kendall_tau_b([1.0], [2.0]))
    assert math.isnan(kendall_tau_b([1.0, 1.0], [1.0, 2.0]))


def test_common_queries_keeps_the_queries_every_combination_has() -> None:
    frame = pd.DataFrame(
        {
            "policy": ["oracle"] * 5 + ["noisy"] * 2,
            "config_id": ["c00", "c00", "c01", "c01", "c00", "c00", "c01"],
            "query_id": ["1", "2", "1", "3", "3", "2", "2"],
        }
    )
    # oracle: c00 has 1, 2, 3 and c01 has 1, 3, so 1 and 3; noisy: both have 2
    kept = common_queries(frame, within=["policy"], across=["config_id"])
    assert kept.index.tolist() == [0, 2, 3, 4, 5, 6]
    with_missing = frame.assign(policy=frame["policy"].where(frame.index != 6))
    # a missing key belongs to no run's table (load_run refuses it): one line naming the key
    with pytest.raises(DataError, match=r"^a row has no policy$"):
        common_queries(with_missing, within=["policy"], across=["config_id"])


def test_common_queries_of_a_frame_every_combination_keeps_is_the_frame() -> None:
    frame = pd.DataFrame(
        {
            "policy": ["oracle"] * 4,
            "config_id": ["c00", "c00", "c01", "c01"],
            "query_id": ["1", "2", "2", "1"],
        }
    )
    # both configs have queries 1 and 2: nothing to drop, no copy (the callers only read it)
    assert common_queries(frame, within=["policy"], across=["config_id"]) is frame


def test_ngroups_numbers_groups_as_pandas_ngroup_does() -> None:
    from evidence_bench.evaluation.statistics import ngroups

    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {
            "c": pd.Categorical(rng.choice(["b", "a", "d"], 500), categories=["a", "b", "c", "d"]),
            "s": pd.Series(rng.choice(["x", "y"], 500), dtype="str"),
            "r": rng.integers(0, 3, 500).astype(np.int16),
        }
    )
    keys = ["c", "s", "r"]
    expected = frame.groupby(keys, sort=False, observed=True).ngroup().to_numpy()
    assert ngroups(frame, keys).tolist() == expected.tolist()
    assert ngroups(pd.DataFrame({"k": ["q2", "q1", "q2"]}), ["k"]).tolist() == [0, 1, 0]
    missing = frame.assign(s=frame["s"].where(frame.index != 7))
    with pytest.raises(DataError, match=r"^a row has no s$"):
        ngroups(missing, keys)
