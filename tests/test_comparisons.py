"""Every comparison of a run at once: within configs on their own queries, across configs on
the queries all of them keep, Holm over the family, fixed cells left out, signs that follow
the seed. Toy frames worked by hand, and a real 15-query Cranfield run whose residual
round-2 query sets differ across configs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evidence_bench.errors import DataError
from evidence_bench.evaluation.attribution import comparisons
from evidence_bench.evaluation.comparisons import (
    RANDOMIZATION_SEED,
    Comparison,
    common_queries,
    compare,
    randomization_seed,
)
from evidence_bench.evaluation.statistics import holm, randomization_test
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from tests.conftest import CRANFIELD15, exported, shared_run

RERANK = Comparison("rerank", "control", ("initial", "control", "rerank"))


def toy(rerank: dict[str, dict[str, float]], policy: str = "oracle") -> pd.DataFrame:
    """initial 0.4 and control 0.5 on every query a config has; rerank as given."""
    rows = []
    for config_id, scores in rerank.items():
        for query_id, value in scores.items():
            for stage, v in (("initial", 0.4), ("control", 0.5), ("rerank", value)):
                rows.append((config_id, policy, query_id, 1, stage, "residual", "nDCG@10", v))
    columns = ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure"]
    return pd.DataFrame(rows, columns=[*columns, "value"])


#: A keeps q1–q4, B q1–q3, C q2–q4 (as residual evaluation can leave them): common q2, q3.
THREE = {
    "A": {"q1": 0.6, "q2": 0.7, "q3": 0.4, "q4": 0.6},  # diffs +0.1 +0.2 −0.1 +0.1
    "B": {"q1": 0.5, "q2": 0.8, "q3": 0.6},  # diffs 0, +0.3, +0.1
    "C": {"q2": 0.7, "q3": 0.7, "q4": 0.7},  # diffs all +0.2
}


@pytest.fixture(scope="module")
def three() -> pd.DataFrame:
    rows = compare(toy(THREE), [RERANK], seed=0, trials=20_000).rows
    return rows.set_index("config_id")


def test_within_a_config_its_own_queries_by_hand(three: pd.DataFrame) -> None:
    a = three.loc["A"]
    # diffs 0.1, 0.2, −0.1, 0.1: mean 0.075; squared deviations 0.000625, 0.015625, 0.030625,
    # 0.000625 sum to 0.0475, so s = sqrt(0.0475/3) = 0.125831; CI 0.075 ± t(0.975, 3)·s/2
    # with t(0.975, 3) = 3.182 (t tables).
    assert (a["n"], a["improved"], a["degraded"], a["unchanged"]) == (4, 3, 1, 0)
    assert a["diff"] == pytest.approx(0.075)
    assert a["diff_std"] == pytest.approx(math.sqrt(0.0475 / 3))
    half = 3.182446 * math.sqrt(0.0475 / 3) / 2
    assert (a["diff_ci_low"], a["diff_ci_high"]) == pytest.approx((0.075 - half, 0.075 + half))
    assert a["mean_control"] == 0.5 and a["mean_rerank"] == pytest.approx(0.575)
    assert a["p_t"] == pytest.approx(
        stats.ttest_rel([0.6, 0.7, 0.4, 0.6], [0.5] * 4).pvalue, rel=1e-10
    )
    b = three.loc["B"]
    assert (b["n"], b["improved"], b["unchanged"]) == (3, 2, 1)  # q1 is a tie
    assert b["diff"] == pytest.approx(0.4 / 3)


def test_all_equal_differences_have_a_defined_p(three: pd.DataFrame) -> None:
    """C gained +0.2 on each of its 3 queries: t is undefined (NaN, not 0); the
    randomization test's exact p is 2/2³ = 0.25 (only all-plus and all-minus reach 0.2)."""
    c = three.loc["C"]
    assert math.isnan(c["p_t"])
    assert c["p_rand"] == pytest.approx(0.25, abs=5 * math.sqrt(0.25 * 0.75 / 20_000))
    # nor an interval: std 0 would give [+0.2, +0.2], the certainty the NaN p declines
    assert c["diff"] == pytest.approx(0.2)
    assert math.isnan(c["diff_ci_low"]) and math.isnan(c["diff_ci_high"])
    # B's tie (q1, 0) beside +0.3 and +0.1 is no such case: s = 0.152753, t(0.975, 2) = 4.303
    half = 4.302653 * 0.152753 / math.sqrt(3)
    assert (three.loc["B", "diff_ci_low"], three.loc["B", "diff_ci_high"]) == pytest.approx(
        (0.4 / 3 - half, 0.4 / 3 + half), abs=1e-5
    )
    # over the common queries q2, q3: A +0.2 and −0.1, B +0.3 and +0.1, C +0.2 twice
    assert three["diff_spread_common"].to_dict() == pytest.approx({"A": 0.3, "B": 0.2, "C": 0.0})


def test_across_configs_the_queries_all_keep_by_hand(three: pd.DataFrame) -> None:
    """Common queries q2, q3. A: +0.2, −0.1, mean 0.05, and every one of the 4 sign
    assignments reaches |sum| 0.1, so p = 1 exactly. B: +0.3, +0.1, mean 0.2: 2 of 4
    assignments reach 0.4, p ≈ 0.5; C: +0.2, +0.2, likewise 0.5. Holm over 3: sorted
    0.5·3 = 1.5 -> 1, so all three are 1."""
    assert set(three["n_common"]) == {2}
    assert three["diff_common"].to_dict() == pytest.approx({"A": 0.05, "B": 0.2, "C": 0.2})
    assert three.loc["A", "p_rand_common"] == 1.0
    tolerance = 5 * math.sqrt(0.25 / 20_000)
    assert three.loc["B", "p_rand_common"] == pytest.approx(0.5, abs=tolerance)
    assert three.loc["C", "p_rand_common"] == pytest.approx(0.5, abs=tolerance)
    assert list(three["p_holm"]) == [1.0, 1.0, 1.0]
    # The within-config test stays on each config's own queries.
    assert list(three["n"]) == [4, 3, 3]


def test_fixed_cells_leave_the_family(three: pd.DataFrame) -> None:
    """C's rerank cannot change (frozen): untested, and the family is A and B, whose common
    queries are q1–q3 (B keeps exactly those, so its common test is its own test)."""
    fixed = pd.DataFrame(
        [("C", "oracle", 1, "rerank", "residual", "nDCG@10")],
        columns=["config_id", "policy", "round", "stage", "eval_mode", "measure"],
    )
    rows = compare(toy(THREE), [RERANK], seed=0, trials=2000, fixed=fixed).rows
    rows = rows.set_index("config_id")
    assert rows.loc["C", "fixed"] and not rows.loc[["A", "B"], "fixed"].any()
    assert rows.loc["C", ["p_t", "p_rand", "p_rand_common", "p_holm"]].isna().all()
    # no difference either: a cell that cannot change has 0 by construction, no evidence
    assert rows.loc["C", ["diff", "diff_ci_low", "diff_ci_high", "diff_common"]].isna().all()
    assert rows.loc["C", "n"] == 3  # its queries are still counted
    assert list(rows.loc[["A", "B"], "n_common"]) == [3, 3]
    assert rows.loc["A", "diff_common"] == pytest.approx(0.2 / 3)  # +0.1 +0.2 −0.1
    assert rows.loc["B", "p_rand_common"] == rows.loc["B", "p_rand"]
    pair = rows.loc[["A", "B"], "p_rand_common"].tolist()
    assert rows.loc[["A", "B"], "p_holm"].tolist() == pytest.approx(holm(pair))


def test_one_query_has_no_interval_and_p_one() -> None:
    rows = compare(toy({"A": {"q1": 0.9}}), [RERANK], trials=100).rows.iloc[0]
    assert rows["n"] == 1 and rows["diff"] == pytest.approx(0.4)
    assert math.isnan(rows["diff_ci_low"]) and math.isnan(rows["diff_ci_high"])
    assert math.isnan(rows["p_t"])
    assert rows["p_rand"] == 1.0  # +0.4 and −0.4 are equally extreme: 2/2


def test_trials_scale_so_holm_can_reach_below_001() -> None:
    """60 configs, each a strong gain on 20 queries: 6000 trials (100 per hypothesis), so
    the smallest Holm-adjusted p, 60/6001, is below 0.01 and the gains are significant."""
    gains = {f"c{i:02d}": {f"q{q:02d}": 0.6 + 0.01 * q for q in range(20)} for i in range(60)}
    result = compare(toy(gains), [RERANK], seed=0)
    assert result.trials == 6000 and result.family == 60
    assert set(result.rows["p_rand"]) == {1 / 6001}  # no sign assignment is as extreme
    assert result.rows["p_holm"].tolist() == pytest.approx([60 / 6001] * 60)
    assert (result.rows["p_holm"] < 0.01).all()


def test_signs_follow_the_seed_and_the_user() -> None:
    frame = pd.concat([toy(THREE, "oracle"), toy(THREE, "noisy")])
    first = compare(frame, [RERANK], seed=0, trials=500).rows
    again = compare(frame.sample(frac=1.0, random_state=3), [RERANK], seed=0, trials=500).rows
    keys = ["config_id", "policy"]
    first, again = first.set_index(keys).sort_index(), again.set_index(keys).sort_index()
    assert list(first["p_rand"]) == list(again["p_rand"])  # row order does not matter
    other = compare(frame, [RERANK], seed=1, trials=500).rows.set_index(keys).sort_index()
    assert (other["p_rand"] != first["p_rand"]).any()
    # The same scores for two users draw different signs: the user is part of the seed.
    assert (
        first.xs("oracle", level="policy")["p_rand"] != first.xs("noisy", level="policy")["p_rand"]
    ).any()
    assert randomization_seed(0, "oracle", 4) != randomization_seed(0, "noisy", 4)
    assert '[seed, "randomization", policy, n]' in RANDOMIZATION_SEED


def test_common_queries_helper() -> None:
    frame = toy(THREE)
    shared = common_queries(frame, within=["policy", "round"], across=["config_id", "stage"])
    assert set(shared["query_id"]) == {"q2", "q3"}
    assert len(shared) == 3 * 3 * 2  # configs × stages × queries


# --- a real run: 15 Cranfield queries, four configs, two rounds ---------------------------


@pytest.fixture(scope="module")
def cranfield15(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Residual round 2 keeps different queries per config: each config displayed other
    documents in round 1, so it exhausted other queries' relevant documents. The run is
    test_report.py's too (made once)."""
    path = shared_run(tmp_path_factory, "cranfield15", CRANFIELD15)
    return pd.read_csv(path / "per_query.csv", dtype={"query_id": str})


def kept(pq: pd.DataFrame, config: str, policy: str, round_: int, stage: str) -> pd.DataFrame:
    """before, control and feedback of one config, on the queries scored in all three."""
    before, control = {
        "rerank": ("initial", "control"),
        "expand": ("deep_initial", "deep_control"),
    }[stage]
    sel = pq[
        (pq["eval_mode"] == "residual")
        & (pq["measure"] == "nDCG@10")
        & (pq["config_id"] == config)
        & (pq["policy"] == policy)
        & (pq["round"] == round_)
    ]
    wide = sel.pivot(index="query_id", columns="stage", values="value")
    return wide[[before, control, stage]].dropna()


def test_real_run_round_two_families_use_the_common_queries(cranfield15: pd.DataFrame) -> None:
    feedback = (cranfield15["eval_mode"] == "residual") & (cranfield15["round"] > 0)
    table = compare(cranfield15[feedback], comparisons(), trials=500).rows
    table = table[table["measure"] == "nDCG@10"]
    configs = sorted(cranfield15["config_id"].unique())
    assert len(configs) == 4
    differing = 0
    for (policy, round_, stage), family in table.groupby(["policy", "round", "stage"]):
        sets = {c: set(kept(cranfield15, c, policy, round_, stage).index) for c in configs}
        common = set.intersection(*sets.values())
        differing += len({len(s) for s in sets.values()}) > 1
        family = family.set_index("config_id")
        assert set(family["n_common"]) == {len(common)}, (policy, round_, stage)
        assert family["n"].to_dict() == {c: len(s) for c, s in sets.items()}
        for config in configs:
            shared = kept(cranfield15, config, policy, round_, stage).loc[sorted(common)]
            gains = shared[stage] - shared[{"rerank": "control", "expand": "deep_control"}[stage]]
            assert family.at[config, "diff_common"] == pytest.approx(gains.mean(), abs=1e-12)
            p = randomization_test(
                shared.iloc[:, 1].tolist(),
                shared[stage].tolist(),
                trials=500,
                seed=randomization_seed(0, policy, len(common)),
            )
            assert family.at[config, "p_rand_common"] == p
        assert family["p_holm"].tolist() == pytest.approx(holm(family["p_rand_common"].tolist()))
    # Round 2 is where the sets differ (each config exhausted other queries in round 1):
    # the test is not vacuous.
    assert differing >= 2
    round2 = table[table["round"] == 2]
    assert (round2["n_common"] < round2["n"]).any()


def test_real_run_within_config_tests_keep_their_own_queries(cranfield15: pd.DataFrame) -> None:
    rows = compare(
        cranfield15[cranfield15["eval_mode"] == "residual"], comparisons(), trials=500
    ).rows
    row = rows[
        (rows["config_id"] == "c03")
        & (rows["policy"] == "oracle")
        & (rows["round"] == 2)
        & (rows["measure"] == "nDCG@10")
        & (rows["stage"] == "rerank")
    ].iloc[0]
    own = kept(cranfield15, "c03", "oracle", 2, "rerank")
    gains = own["rerank"] - own["control"]
    assert row["n"] == len(own) and row["diff"] == pytest.approx(gains.mean())
    assert row["p_t"] == pytest.approx(stats.ttest_rel(own["rerank"], own["control"]).pvalue)
    low, high = stats.t.interval(0.95, len(gains) - 1, loc=gains.mean(), scale=stats.sem(gains))
    assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((low, high))
    assert np.isfinite(row["p_rand"])


@pytest.fixture(scope="module")
def cacm(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    overrides = [
        "+experiment=smoke",
        "query_set=cacm",
        "experiment.queries=12",
        "experiment.rounds=2",
        "+experiment.grid={beta:[0.25,1.5]}",
        f"runs_dir={tmp_path_factory.mktemp('cacm')}",
        "workers=1",
        "report=false",
        "progress=false",
    ]
    cfg, text = compose(overrides)
    path = exported(perform_run(cfg, text).path, "csv")
    return pd.read_csv(path / "per_query.csv", dtype={"query_id": str})


def test_cacm_statistics_against_scipy(cacm: pd.DataFrame) -> None:
    """On CACM every config keeps the same queries here: the common test is the own test,
    and every number matches scipy computed from per_query.csv."""
    residual = cacm[cacm["eval_mode"] == "residual"]
    rows = compare(residual, comparisons(), seed=0, trials=500).rows
    assert (rows["n_common"] == rows["n"]).all()
    assert (rows["p_rand_common"] == rows["p_rand"]).all()
    checked = 0
    for row in rows.to_dict("records"):
        sel = residual[
            (residual["config_id"] == row["config_id"])
            & (residual["round"] == row["round"])
            & (residual["measure"] == row["measure"])
        ]
        wide = sel.pivot(index="query_id", columns="stage", values="value")
        before = {"rerank": "initial", "expand": "deep_initial"}[row["stage"]]
        three = wide[[before, row["reference"], row["stage"]]].dropna()
        d = three[row["stage"]] - three[row["reference"]]
        assert row["n"] == len(d) and row["diff"] == pytest.approx(d.mean(), abs=1e-12)
        assert row["improved"] == int((d > 1e-9).sum()) and row["degraded"] == int(
            (d < -1e-9).sum()
        )
        if d.abs().max() <= 1e-9:
            assert row["p_t"] == 1.0 and row["p_rand"] == 1.0  # no difference at all
        elif np.ptp(d) > 1e-9:
            assert row["p_t"] == pytest.approx(
                stats.ttest_rel(three[row["stage"]], three[row["reference"]]).pvalue, rel=1e-9
            )
            low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
            assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((low, high))
            checked += 1
    assert checked > 20
    # Holm over the two configs of each family.
    for _, family in rows.groupby(["policy", "round", "measure", "stage", "reference"]):
        assert len(family) == 2
        assert family["p_holm"].tolist() == pytest.approx(holm(family["p_rand_common"].tolist()))


def test_cacm_signs_follow_the_seed(cacm: pd.DataFrame) -> None:
    residual = cacm[cacm["eval_mode"] == "residual"]
    first = compare(residual, comparisons(), seed=0, trials=500).rows["p_rand"]
    again = compare(residual, comparisons(), seed=0, trials=500).rows["p_rand"]
    other = compare(residual, comparisons(), seed=7, trials=500).rows["p_rand"]
    assert first.tolist() == again.tolist()
    moved = (first != other) & (first < 1.0)
    assert moved.sum() > len(first) // 4  # another seed, other signs, over the same scores


def test_categorical_keys_compare_as_the_plain_frame_does() -> None:
    """A run's frame has categorical keys (some categories unused, queries met out of
    category order): it gives the rows, floats and order of the same frame with plain
    strings, worked by hand; a repeated row is the same one-line error."""
    plain = toy(THREE)
    plain = pd.concat([plain, toy({"D": {"q10": 0.9, "q9": 0.3}}, policy="noisy")])
    coded = plain.copy()
    for column in ("config_id", "policy", "query_id", "stage", "eval_mode", "measure"):
        values = sorted({*plain[column], f"zz-unused-{column}"})
        coded[column] = pd.Categorical(plain[column], categories=values)
    a = compare(plain, [RERANK], seed=0, trials=500).rows
    b = compare(coded, [RERANK], seed=0, trials=500).rows
    for column in ("config_id", "policy", "eval_mode", "measure"):
        b[column] = b[column].astype(str)
    pd.testing.assert_frame_equal(a, b, check_exact=True)
    assert b["config_id"].tolist() == ["A", "B", "C", "D"]
    by_config = b.set_index("config_id")
    assert by_config.loc["A", "diff"] == pytest.approx(0.075)
    # D: q10 0.9 − 0.5 = +0.4, q9 0.3 − 0.5 = −0.2
    assert by_config.loc["D", ["n", "improved", "degraded"]].tolist() == [2, 1, 1]
    assert by_config.loc["D", "diff"] == pytest.approx(0.1)
    assert by_config.loc["D", "p_t"] == pytest.approx(stats.ttest_1samp([0.4, -0.2], 0).pvalue)
    repeated = pd.concat([coded, coded.iloc[:1]])
    with pytest.raises(DataError, match="appears more than once"):
        compare(repeated, [RERANK], seed=0, trials=10)
    with pytest.raises(DataError, match="appears more than once"):
        compare(pd.concat([plain, plain.iloc[:1]]), [RERANK], seed=0, trials=10)


@pytest.mark.parametrize("categorical", [False, True])
def test_a_missing_key_is_a_one_line_error(categorical: bool) -> None:
    """A compared row without a round (a nullable integer's NA) or a config cannot be put in
    any comparison row: one line names the key, plain or categorical alike."""
    frame = toy(THREE)
    missing = (frame["config_id"] == "A") & (frame["query_id"] == "q3")
    frame["round"] = pd.array([pd.NA if m else 1 for m in missing], "Int64")
    if categorical:
        for column in ("config_id", "policy", "query_id", "stage", "eval_mode", "measure"):
            frame[column] = pd.Categorical(frame[column])
    with pytest.raises(
        DataError, match=r"^per_query\.csv: a row of a compared stage has no round$"
    ):
        compare(frame, [RERANK], seed=0, trials=10)
    frame["round"] = 1
    frame["config_id"] = frame["config_id"].where(~missing)
    with pytest.raises(DataError, match=r"has no config_id$"):
        compare(frame, [RERANK], seed=0, trials=10)
    assert len(compare(frame[~missing], [RERANK], seed=0, trials=10).rows) == 3
