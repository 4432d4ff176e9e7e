"""Validity: Kendall's τ-b between orderings of settings, the flips, the variance split of
per-query gains, the judgment-budget curve, runs over several seeds, and the report's panel.

Every expected value is worked by hand in the comments, or comes from a reference
implementation (scipy.stats.kendalltau; a least-squares fit for the sums of squares).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evidence_bench.errors import ConfigurationError
from evidence_bench.evaluation.validity import (
    UserLabel,
    agreements,
    budget_curve,
    kendall_tau_b,
    per_query_gains,
    robustness,
    saturation,
    setting_gains,
    sums_of_squares,
    variance_components,
)
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run, user_variants
from evidence_bench.experiment.run import perform_run
from evidence_bench.experiment.runner import plan_users
from evidence_bench.report import analyze, gather_multirun, load_run, render_report
from evidence_bench.report.fresh import new_run_report
from tests.conftest import exported
from tests.report_fixtures import write_multirun, write_run_dir

# --- Kendall's tau-b --------------------------------------------------------------------------


def test_tau_b_by_hand_with_a_tie() -> None:
    # A > B > C = D in x; A > C > B > D in y. Pairs: AB, AC, AD, BD concordant (4); BC
    # discordant (1); CD tied in x only (n1 = 1, n2 = 0); n0 = 6.
    # tau_b = (4 - 1) / sqrt((6 - 1) * (6 - 0)) = 3 / sqrt(30) = 0.5477225575...
    x, y = [4.0, 3.0, 2.0, 2.0], [4.0, 2.0, 3.0, 1.0]
    assert kendall_tau_b(x, y) == pytest.approx(3 / math.sqrt(30), abs=1e-15)
    assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)


def test_tau_b_matches_scipy_on_tied_data() -> None:
    rng = np.random.default_rng(16)
    for _ in range(300):
        n = int(rng.integers(2, 9))
        x, y = rng.integers(0, 4, n) / 4, rng.integers(0, 4, n) / 4
        expected = stats.kendalltau(x, y).statistic
        got = kendall_tau_b(list(x), list(y))
        assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


def test_tau_b_edges() -> None:
    assert kendall_tau_b([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 1.0
    assert kendall_tau_b([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == -1.0
    assert math.isnan(kendall_tau_b([0.5, 0.5, 0.5], [1.0, 2.0, 3.0]))  # x ties every pair
    assert math.isnan(kendall_tau_b([0.1], [0.2]))
    # float noise is no difference: 0.1 + 0.2 and 0.3 are tied, so one pair of x is tied
    assert kendall_tau_b([0.1 + 0.2, 0.3, 0.0], [0.3, 0.2, 0.0]) == pytest.approx(
        stats.kendalltau([1, 1, 0], [2, 1, 0]).statistic
    )
    with pytest.raises(ValueError, match="differ in length"):
        kendall_tau_b([1.0], [1.0, 2.0])


# --- orderings from per-query rows ------------------------------------------------------------


def _per_query(gains: dict[tuple[str, str, str], float], mode: str = "residual") -> pd.DataFrame:
    """per_query rows where rerank − control = gain, per (config, policy, query)."""
    rows = []
    for (config, policy, query), gain in gains.items():
        for stage, value in (("control", 0.5), ("rerank", 0.5 + gain)):
            rows.append((config, policy, query, 1, stage, mode, "nDCG@10", value))
    columns = ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure", "value"]
    return pd.DataFrame(rows, columns=columns)


def test_two_users_ordering_tau_and_flip() -> None:
    # oracle: c00 +0.3, c01 +0.2, c02 +0.1 (means over queries q1, q2)
    # noisy:  c00 +0.3, c01 +0.05, c02 +0.15 -> c01 and c02 flip
    # tau_b = (2 - 1) / 3 = 1/3
    gains = {}
    for config, (o, n) in {"c00": (0.3, 0.3), "c01": (0.2, 0.05), "c02": (0.1, 0.15)}.items():
        gains |= {(config, "oracle", "q1"): o - 0.1, (config, "oracle", "q2"): o + 0.1}
        gains |= {(config, "noisy", "q1"): n, (config, "noisy", "q2"): n}
    table = per_query_gains(_per_query(gains))
    assert sorted(table["stage"].unique()) == ["rerank"]
    means = setting_gains(table)
    labels = [
        UserLabel("oracle", "oracle", None, 10, False),
        UserLabel("noisy", "noisy", None, 10, False),
    ]
    (found,) = agreements(
        means, labels, primary_mode="residual", primary_measure="nDCG@10", modes=["residual"]
    )
    assert (found.factor, found.a, found.b, found.items) == ("user", "oracle", "noisy", 3)
    assert found.tau == pytest.approx(1 / 3)
    (flip,) = found.flips
    assert (flip.first, flip.second) == (("c01", "rerank"), ("c02", "rerank"))
    assert (flip.a_first, flip.a_second) == pytest.approx((0.2, 0.1))
    assert (flip.b_first, flip.b_second) == pytest.approx((0.05, 0.15))
    assert found.best_a == found.best_b == ("c00", "rerank")
    verdict = robustness([found], ("c00", "rerank"))
    assert verdict.robust and (verdict.orderings, verdict.first) == (2, 2)
    assert not robustness([found], ("c01", "rerank")).robust


def test_a_user_over_seeds_is_the_mean_of_its_seeds_and_its_seeds_are_compared() -> None:
    # noisy@s0: c00 0.2, c01 0.1; noisy@s1: c00 0.0, c01 0.1 -> seeds flip (tau -1);
    # pooled: c00 0.1, c01 0.1: tied; against oracle (c00 0.3 > c01 0.1) tau_b is NaN
    gains = {
        ("c00", "noisy@s0", "q1"): 0.2, ("c01", "noisy@s0", "q1"): 0.1,
        ("c00", "noisy@s1", "q1"): 0.0, ("c01", "noisy@s1", "q1"): 0.1,
        ("c00", "oracle", "q1"): 0.3, ("c01", "oracle", "q1"): 0.1,
    }  # fmt: skip
    labels = [
        UserLabel("oracle", "oracle", 0, 10, False),
        UserLabel("noisy@s0", "noisy", 0, 10, False),
        UserLabel("noisy@s1", "noisy", 1, 10, False),
    ]
    found = agreements(
        setting_gains(per_query_gains(_per_query(gains))),
        labels,
        primary_mode="residual",
        primary_measure="nDCG@10",
        modes=["residual"],
    )
    by = {(a.factor, a.a, a.b): a for a in found}
    assert math.isnan(by[("user", "oracle", "noisy")].tau)
    assert by[("seed", "noisy@s0", "noisy@s1")].tau == -1.0
    assert len(by[("seed", "noisy@s0", "noisy@s1")].flips) == 1


def test_modes_fall_back_to_a_measure_that_can_change() -> None:
    # frozen holds nDCG@10 fixed (no rows once fixed cells are dropped), AP can change
    rows = []
    for mode, measure, gains in (
        ("residual", "nDCG@10", {"c00": 0.2, "c01": 0.1}),
        ("residual", "AP", {"c00": 0.1, "c01": 0.3}),
        ("frozen", "nDCG@10", {"c00": 0.0, "c01": 0.0}),
        ("frozen", "AP", {"c00": 0.05, "c01": 0.2}),
    ):
        for config, gain in gains.items():
            rows += [
                (config, "oracle", "q1", 1, "control", mode, measure, 0.4),
                (config, "oracle", "q1", 1, "rerank", mode, measure, 0.4 + gain),
            ]
    columns = ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure", "value"]
    fixed = pd.DataFrame(
        [
            (c, "oracle", 1, s, "frozen", "nDCG@10")
            for c in ("c00", "c01")
            for s in ("control", "rerank")
        ],
        columns=["config_id", "policy", "round", "stage", "eval_mode", "measure"],
    )
    gains_ = per_query_gains(pd.DataFrame(rows, columns=columns), fixed=fixed)
    assert not len(gains_[(gains_["eval_mode"] == "frozen") & (gains_["measure"] == "nDCG@10")])
    (mode,) = agreements(
        setting_gains(gains_),
        [UserLabel("oracle", "oracle", None, 10, False)],
        primary_mode="residual",
        primary_measure="nDCG@10",
        modes=["residual", "frozen"],
    )
    assert (mode.factor, mode.measure, mode.tau, mode.flips) == ("mode", "AP", 1.0, ())
    verdict = robustness([mode], ("c00", "rerank"))
    assert (verdict.modes, verdict.modes_agree) == (1, 1)


# --- the variance decomposition ---------------------------------------------------------------

#: config × seed × query; worked by hand: grand mean 3; config means 2, 4 -> SS 4·(1 + 1) = 8;
#: seed means 2.5, 3.5 -> SS 4·(0.25 + 0.25) = 2; query means 2, 4 -> SS 8; config × seed
#: cell means 2, 2, 3, 5 -> effects ±0.5 -> SS 2·4·0.25 = 2; config × query and seed × query
#: effects all 0; total Σ(y − 3)² = 4 + 0 + 4 + 0 + 1 + 1 + 1 + 9 = 20, so residual 0.
HAND = np.array([[[1.0, 3.0], [1.0, 3.0]], [[2.0, 4.0], [4.0, 6.0]]])
HAND_SS = {
    "config": 8.0, "seed": 2.0, "query": 8.0, "config × seed": 2.0,
    "config × query": 0.0, "seed × query": 0.0, "residual": 0.0, "total": 20.0,
}  # fmt: skip


def test_sums_of_squares_by_hand() -> None:
    table = sums_of_squares(HAND, ["config", "seed", "query"]).set_index("source")
    assert table["ss"].to_dict() == pytest.approx(HAND_SS, abs=1e-12)
    assert table["df"].to_dict() == {s: (7 if s == "total" else 1) for s in HAND_SS}
    assert table.loc["config", "share"] == pytest.approx(0.4)
    assert table.loc["config × seed", "share"] == pytest.approx(0.1)


def _dummies(levels: tuple[int, ...], factors: tuple[int, ...]) -> np.ndarray:
    """Indicator columns of every cell of ``factors`` (an effect's full design)."""
    cells = list(itertools.product(*(range(n) for n in levels)))
    groups = sorted({tuple(c[f] for f in factors) for c in cells})
    return np.array([[float(tuple(c[f] for f in factors) == g) for g in groups] for c in cells])


def test_sums_of_squares_match_least_squares_fits() -> None:
    # Reference: in a balanced layout an effect's SS is the drop in residual SS from the
    # model of everything it contains to that model plus it (hierarchical least squares).
    rng = np.random.default_rng(5)
    levels = (3, 4, 5)
    cube = rng.normal(size=levels)
    y = cube.reshape(-1)
    table = sums_of_squares(cube, ["a", "b", "c"]).set_index("source")

    def rss(terms: list[tuple[int, ...]]) -> float:
        design = np.hstack([np.ones((y.size, 1))] + [_dummies(levels, t) for t in terms])
        fit = np.linalg.lstsq(design, y, rcond=None)[0]
        return float(((y - design @ fit) ** 2).sum())

    for name, term in {"a": (0,), "a × c": (0, 2), "b × c": (1, 2)}.items():
        contained = [t for t in [(0,), (1,), (2,)] if set(t) < set(term)]
        assert table.loc[name, "ss"] == pytest.approx(rss(contained) - rss([*contained, term]))
    assert table["ss"].drop("total").sum() == pytest.approx(table.loc["total", "ss"])
    assert table.loc["residual", "df"] == 2 * 3 * 4


def test_variance_components_from_gains() -> None:
    # HAND as per-query gains of noisy at two seeds: the same shares come back
    rows = []
    for (c, s, q), value in np.ndenumerate(HAND):
        rows.append((f"c0{c}", f"noisy@s{s}", 1, "residual", "nDCG@10", "rerank", f"q{q}", value))
    gains = pd.DataFrame(
        rows,
        columns=[
            "config_id",
            "policy",
            "round",
            "eval_mode",
            "measure",
            "stage",
            "query_id",
            "gain",
        ],
    )
    labels = [UserLabel(f"noisy@s{s}", "noisy", s, 10, False) for s in (0, 1)]
    table = variance_components(gains, labels, eval_mode="residual", measure="nDCG@10")
    assert set(table["user"]) == {"noisy"}
    assert (table[["configs", "seeds", "queries"]].iloc[0] == [2, 2, 2]).all()
    assert table.set_index("source")["ss"].to_dict() == pytest.approx(HAND_SS, abs=1e-12)
    # a user under one seed has no seed to split by
    assert variance_components(gains, labels[:1], eval_mode="residual", measure="nDCG@10").empty


# --- the budget curve -------------------------------------------------------------------------


def test_budget_curve_and_where_it_stops_paying() -> None:
    # depth 1: gains 0.0, 0.2 -> mean 0.1; depth 3: 0.3, 0.5 -> 0.4; depth 10: 0.35, 0.45
    # -> 0.4 (sd 0.0707, half-width t(0.975, 1) · 0.0707 / √2 = 12.706 · 0.05 = 0.635).
    # The largest mean is depth 3's 0.4 (first of the tie); its lower bound 0.4 − 1.27 is
    # below depth 1's 0.1, so feedback stops paying at depth 1 by this rule.
    values = {"oracle@d1": (0.0, 0.2), "oracle@d3": (0.3, 0.5), "oracle": (0.35, 0.45)}
    rows = [
        ("c00", label, 1, "residual", "nDCG@10", "rerank", f"q{i}", v)
        for label, pair in values.items()
        for i, v in enumerate(pair)
    ]
    gains = pd.DataFrame(
        rows,
        columns=[
            "config_id",
            "policy",
            "round",
            "eval_mode",
            "measure",
            "stage",
            "query_id",
            "gain",
        ],
    )
    labels = [
        UserLabel("oracle", "oracle", 0, 10, False),
        UserLabel("oracle@d1", "oracle", 0, 1, True),
        UserLabel("oracle@d3", "oracle", 0, 3, True),
    ]
    curve = budget_curve(gains, labels, eval_mode="residual", measure="nDCG@10")
    assert list(curve["depth"]) == [1, 3, 10]
    assert list(curve["mean"]) == pytest.approx([0.1, 0.4, 0.4])
    half = stats.t.ppf(0.975, 1) * np.std([0.35, 0.45], ddof=1) / math.sqrt(2)
    assert curve["ci_high"].iloc[2] == pytest.approx(0.4 + half)
    (stop,) = saturation(curve).to_dict("records")
    assert (stop["depth"], stop["best_depth"]) == (1, 3)
    # narrow intervals: depth 1's 0.1 is below 3's lower bound, so it pays up to 3
    tight = curve.assign(ci_low=curve["mean"] - 0.01)
    assert saturation(tight)["depth"].iloc[0] == 3
    # depth 3 gaining exactly 0.4 on both queries: no t interval (a zero-width one made its
    # mean the floor); the rule then takes the mean itself, as for one query
    same = gains.assign(gain=np.where(gains["policy"] == "oracle@d3", 0.4, gains["gain"]))
    curve = budget_curve(same, labels, eval_mode="residual", measure="nDCG@10")
    assert curve["ci_low"].isna().tolist() == [False, True, False]


# --- runs over several seeds and budgets ------------------------------------------------------


def test_user_variants_labels() -> None:
    users = {"oracle": {"kind": "oracle", "depth": 10}, "noisy": {"kind": "noisy", "depth": 10}}
    found = user_variants(users, [0, 3], [1, 10], 0)
    assert list(found) == ["oracle", "oracle@d1", "noisy@s0", "noisy@s3", "noisy@d1@s0"]
    assert (found["noisy@s3"].seed, found["noisy@s3"].episode_policy) == (3, "noisy")
    assert found["oracle@d1"].depth == 1 and found["oracle@d1"].as_dict()["budget"]
    with pytest.raises(ConfigurationError, match=r"policies\.a@b: '@' is reserved"):
        user_variants({"a@b": {"kind": "oracle"}}, [0], [], 0)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("seeds=[1,1]", "seeds: 1 appears twice"),
        ("experiment.budgets=[0]", "experiment.budgets: 0 must be between 1 and 200"),
    ],
)
def test_bad_seeds_and_budgets(override: str, message: str) -> None:
    cfg, _ = compose(["+experiment=smoke", override])
    with pytest.raises(ConfigurationError, match=message):
        plan_run(cfg)


def _run(tmp_path: Path, name: str, *overrides: str) -> Path:
    cfg, text = compose(
        [
            "+experiment=smoke",
            "+policy@policies.noisy=noisy",
            "experiment.queries=4",
            "eval.modes=[residual,frozen]",
            f"runs_dir={tmp_path / name}",
            "progress=false",
            "workers=1",
            *overrides,
        ]
    )
    return Path(perform_run(cfg, text, report=new_run_report).path)


def test_a_seed_of_a_run_over_seeds_is_that_seeds_run(tmp_path: Path) -> None:
    """noisy@s3 of seeds=[0,3] gives exactly what noisy gives in a seed=3 run, on Cranfield;
    the oracle, which draws nothing, runs once; and the run is the same in another process
    count (workers=2)."""
    many = _run(tmp_path, "many", "seeds=[0,3]", "report=false")
    alone = _run(tmp_path, "alone", "seed=3", "report=false")
    exported(many, "csv")
    exported(alone, "csv")
    rows = pd.read_csv(many / "per_query.csv", dtype=str)
    assert sorted(rows["policy"].unique()) == ["noisy@s0", "noisy@s3", "oracle"]
    three = rows[rows["policy"] == "noisy@s3"].assign(policy="noisy")
    single = pd.read_csv(alone / "per_query.csv", dtype=str)
    single = single[single["policy"] == "noisy"]
    pd.testing.assert_frame_equal(three.reset_index(drop=True), single.reset_index(drop=True))
    assert not rows[rows["policy"] == "noisy@s0"]["value"].equals(three["value"])
    again = _run(tmp_path, "again", "seeds=[0,3]", "report=false", "workers=2")
    exported(again, "csv")
    assert (again / "per_query.csv").read_bytes() == (many / "per_query.csv").read_bytes()


def test_panel_in_a_run_over_seeds_and_budgets(tmp_path: Path) -> None:
    run = _run(tmp_path, "panel", "seeds=[0,1]", "experiment.budgets=[1,3]")
    analysis = analyze(load_run(run))
    assert analysis.validity is not None
    (group,) = analysis.validity.groups
    factors = [(a.factor, a.a, a.b) for a in group.agreements]
    assert ("user", "oracle", "noisy") in factors and ("seed", "noisy@s0", "noisy@s1") in factors
    assert set(group.curve["depth"]) == {1, 3, 10} and set(group.curve["user"]) == {
        "oracle",
        "noisy",
    }
    # the best setting is picked at each user's own depth: budget variants are not users
    assert analysis.best is not None
    assert not any("@d" in p for p in analysis.best.rows["policy"])
    html = (run / "report.html").read_text()
    assert 'id="validity"' in html and 'class="verdict-validity"' in html
    assert html.count('class="validity-budget"') == 1
    render_report(run)
    assert (run / "report.html").read_text() == html  # the same page from the run's files


def test_panel_present_for_two_users_absent_for_one(tmp_path: Path) -> None:
    two = write_run_dir(tmp_path / "two", n_queries=6, rounds=1)
    html = render_report(two).read_text()
    assert 'id="validity"' in html and 'data-factor="user"' in html
    assert "<script>alert" not in html.split('id="validity"', 1)[1].split("</section>", 1)[0]
    one = write_run_dir(tmp_path / "one", n_queries=6, rounds=1, policies=("oracle",))
    page = render_report(one).read_text()
    assert 'id="validity"' not in page and 'class="verdict-validity"' not in page


def test_a_multirun_keeps_its_runs_user_variants(tmp_path: Path) -> None:
    """A gathered multirun knows oracle@d3 is a budget, not a user: the panel's users are
    oracle and noisy, and the budget curve has the oracle's depths."""
    sweep = write_multirun(
        tmp_path, n_queries=6, rounds=1, policies=("oracle", "oracle@d3", "noisy")
    )
    variants = {
        "oracle": {"user": "oracle", "seed": 0, "depth": 10, "budget": False},
        "oracle@d3": {"user": "oracle", "seed": 0, "depth": 3, "budget": True},
        "noisy": {"user": "noisy", "seed": 0, "depth": 10, "budget": False},
    }
    for job in ("0", "1"):
        path = sweep / job / "run" / "manifest.json"
        manifest = json.loads(path.read_text())
        path.write_text(json.dumps({**manifest, "variants": variants}))
    data = gather_multirun(sweep)
    assert data.manifest["variants"] == variants
    panel = analyze(data).validity
    assert panel is not None
    users = {(a.a, a.b) for g in panel.groups for a in g.agreements if a.factor == "user"}
    assert users == {("oracle", "noisy")}
    assert all(set(g.curve["depth"]) == {3, 10} for g in panel.groups)


def test_the_validity_experiments_users_never_share_a_stream_of_draws() -> None:
    """A draw is per (user seed, query, round, document): two users at one seed would get the
    same noise, and the panel would count it as their agreement. Each stochastic user of
    ``validity`` has seeds of its own, at every seed of the run (its budget variants share its
    own, as one user with less time)."""
    plan = plan_run(compose(["+experiment=validity", "query_set=cranfield"])[0])
    seeds: dict[str, set[int]] = {}
    for name, user in plan_users(plan):
        if getattr(user, "seed", None) is not None:
            seeds.setdefault(name.split("@")[0], set()).add(user.seed)  # type: ignore[attr-defined]
    assert sorted(seeds) == ["cascade", "dbn", "noisy", "pbm"]
    assert all(len(own) == 5 for own in seeds.values())  # seeds=[0, 1, 2, 3, 4]
    for a, b in itertools.combinations(seeds, 2):
        assert not seeds[a] & seeds[b], (a, b)
