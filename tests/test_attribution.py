"""Validity of the before/after comparison: feedback that is switched off gains exactly
nothing, and a user who marks at random gains nothing significant."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from evidence_bench.evaluation.attribution import BASELINES, JUDGMENT, comparisons
from evidence_bench.evaluation.comparisons import compare
from evidence_bench.evaluation.statistics import holm
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.record import record
from evidence_bench.experiment.run import perform_run
from tests.conftest import exported


def _per_query(overrides: list[str]) -> pd.DataFrame:
    cfg, text = compose([*overrides, "report=false", "progress=false"])
    path = exported(perform_run(cfg, text).path, "csv")
    return pd.read_csv(path / "per_query.csv", dtype={"query_id": str})


def attribution(
    per_query: pd.DataFrame,
    *,
    eval_modes: tuple[str, ...] = ("residual",),
    baselines: dict[str, tuple[str, str]] = BASELINES,
) -> pd.DataFrame:
    """Each feedback stage against its control, feedback rounds of ``eval_modes`` only."""
    frame = per_query[per_query["eval_mode"].isin(eval_modes) & (per_query["round"] > 0)]
    return compare(frame, comparisons(baselines)).rows


def test_feedback_switched_off_has_exactly_zero_attributable_gain(
    tiny_collection: Path, tmp_path: Path
) -> None:
    overrides = [
        "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={tiny_collection}", f"query_set.cassettes={tmp_path / 'c'}",
        f"runs_dir={tmp_path / 'runs'}", "experiment.depth=10", "workers=1",
        # the ranker ignores marks and the refiner adds nothing: no feedback at all
        "ranker.beta=0", "ranker.gamma=0", "refiner.max_terms=0",
    ]  # fmt: skip
    cfg, _ = compose(overrides)
    record(plan_run(cfg), provider="simulator", rounds=0)
    table = attribution(_per_query(overrides), eval_modes=("full", "residual", "frozen"))
    assert set(table["stage"]) == {"rerank", "expand"}
    assert (table["diff"] == 0).all()
    assert (table["improved"] == 0).all() and (table["degraded"] == 0).all()
    assert (table["p_rand"] == 1.0).all()


def test_with_feedback_on_the_same_queries_gain_is_not_zero(
    tiny_collection: Path, tmp_path: Path
) -> None:
    overrides = [
        "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={tiny_collection}", f"query_set.cassettes={tmp_path / 'c'}",
        f"runs_dir={tmp_path / 'runs'}", "experiment.depth=10", "workers=1",
    ]  # fmt: skip
    table = attribution(_per_query(overrides), eval_modes=("full",))
    assert (table["diff"] != 0).any()


@pytest.fixture(scope="module")
def random_and_oracle(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    """Every Cranfield query, two rounds, an oracle and a user who marks at random, scored
    in residual mode only (the mode ``attribution`` reads by default)."""
    return _per_query(
        [
            "+experiment=ci",
            "experiment.queries=null",
            "~policies.noisy",
            "+policy@policies.random=random",
            "eval.modes=[residual]",
            f"runs_dir={tmp_path_factory.mktemp('validity')}",
        ]
    )


def test_a_user_marking_at_random_gains_nothing_from_its_judgments(
    random_and_oracle: pd.DataFrame,
) -> None:
    table = attribution(random_and_oracle, baselines=JUDGMENT)
    randomly = table[table.policy == "random"].copy()
    assert len(randomly) == 10 and (randomly["n"] > 150).all()  # 2 rounds x 5 measures
    # "no significant gain anywhere" is 10 claims at once: Holm over all of them
    randomly["p_all"] = holm(randomly["p_rand"].tolist())
    significant_gain = (randomly["diff"] > 0) & (randomly["p_all"] < 0.05)
    assert not significant_gain.any(), randomly[["round", "measure", "diff", "p_all"]]


def test_an_oracles_judgments_add_significantly(random_and_oracle: pd.DataFrame) -> None:
    """The shuffled control is not blind: it detects judgments that carry information."""
    table = attribution(random_and_oracle, baselines=JUDGMENT)
    oracle = table[(table.policy == "oracle") & (table.measure == "nDCG@10")]
    assert (oracle["diff"] > 0).all()
    assert oracle[oracle["round"] == 1]["p_holm"].iloc[0] < 0.05


def test_an_oracle_user_shows_a_significant_gain(tmp_path: Path) -> None:
    per_query = _per_query(["+experiment=smoke", "experiment.queries=60", f"runs_dir={tmp_path}"])
    table = attribution(per_query)
    significant = table[(table["measure"] == "nDCG@10")]
    assert (significant["diff"] > 0).all() and (significant["p_holm"] < 0.05).all()


def test_gains_are_the_paired_differences(tmp_path: Path) -> None:
    per_query = _per_query(["+experiment=smoke", f"runs_dir={tmp_path}"])
    table = attribution(per_query)
    row = table[(table.stage == "rerank") & (table.measure == "AP")].iloc[0]
    residual = per_query[(per_query.eval_mode == "residual") & (per_query.measure == "AP")]
    by_stage = residual[residual["round"] == 1].pivot(
        index="query_id", columns="stage", values="value"
    )
    assert row["diff"] == pytest.approx((by_stage["rerank"] - by_stage["control"]).mean())
    assert row["mean_control"] == pytest.approx(by_stage["control"].mean())


def test_a_run_without_expansions_is_attributed_by_hand() -> None:
    """Rerank stages only (no expand, so no deep_initial or deep_control): three queries,
    initial 0.4, control 0.5, rerank 0.7 each: gain 0.7 - 0.5 = 0.2 on every query."""
    rows = [
        ("A", "oracle", q, 1, stage, "residual", "nDCG@10", value)
        for q in ("q1", "q2", "q3")
        for stage, value in (("initial", 0.4), ("control", 0.5), ("rerank", 0.7))
    ]
    columns = ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure", "value"]
    out = attribution(pd.DataFrame(rows, columns=columns))
    assert out["stage"].tolist() == ["rerank"]
    row = out.iloc[0]
    assert row["n"] == 3
    assert [row["mean_initial"], row["mean_control"], row["mean_rerank"]] == pytest.approx(
        [0.4, 0.5, 0.7]
    )
    assert row["diff"] == pytest.approx(0.2)
