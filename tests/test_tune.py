"""Cross-validated tuning (``+experiment=rocchio_tune``): folds, the search, its run."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats

from evidence_bench.collections.queryset import load_query_set
from evidence_bench.errors import ConfigurationError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.tune import perform_tune
from evidence_bench.experiment.tune.folds import assign_folds, deal
from evidence_bench.experiment.tune.plan import plan_tuning
from evidence_bench.experiment.tune.search import CrossValidation, SearchSpace, cross_validate
from evidence_bench.report.fresh import new_tuning_report
from evidence_bench.report.tuning import tuning_table
from tests.conftest import exported
from tests.fault_fixtures import main_in_process

ROOT = Path(__file__).resolve().parents[1]
CRANFIELD = {"name": "cranfield", "path": "collections/cranfield", "cassettes": "x"}
SPACE = SearchSpace((("beta", 0.0, 2.0), ("gamma", 0.0, 1.0)), step=0.05)

# -- folds ----------------------------------------------------------------------------------


def test_deal_hands_out_round_robin_in_order() -> None:
    assert deal(["a", "b", "c", "d", "e"], 2) == (("a", "c", "e"), ("b", "d"))
    assert deal(["1", "2", "3", "4", "5", "6", "7"], 3) == (("1", "4", "7"), ("2", "5"), ("3", "6"))
    assert deal(["a", "b"], 2) == (("a",), ("b",))


def _cranfield_ids() -> list[str]:
    return list(load_query_set(CRANFIELD, limit=None).queries)


@pytest.mark.parametrize(("k", "sizes"), [(5, {45}), (2, {112, 113}), (7, {32, 33})])
def test_every_cranfield_query_is_held_out_exactly_once(k: int, sizes: set[int]) -> None:
    ids = _cranfield_ids()
    assert len(ids) == 225
    folds = assign_folds(ids, k, seed=0)
    assert len(folds) == k
    assert {len(f) for f in folds} == sizes  # 225 = 5 x 45 = 113 + 112 = 4 x 32 + 3 x 33
    held = [q for fold in folds for q in fold]
    assert sorted(held) == sorted(ids)  # each once: disjoint and covering
    position = {q: i for i, q in enumerate(ids)}
    for fold in folds:  # listed in the query set's order
        assert [position[q] for q in fold] == sorted(position[q] for q in fold)


def test_folds_are_fixed_by_the_seed() -> None:
    ids = _cranfield_ids()
    assert assign_folds(ids, 5, seed=0) == assign_folds(list(ids), 5, seed=0)
    assert assign_folds(ids, 5, seed=1) != assign_folds(ids, 5, seed=0)
    # a shuffle, not the query set's order dealt: the first fold is not 1, 6, 11, ...
    assert assign_folds(ids, 5, seed=0)[0] != deal(ids, 5)[0]


# -- the search, with a scorer that records what it was asked ---------------------------------

IDS = [f"q{i:02d}" for i in range(12)]
#: each query's preferred beta: the score of a setting is -(beta - target)^2
TARGETS = {q: (0.5 if i % 2 else 1.5) for i, q in enumerate(IDS)}


class Spy:
    """A scorer that records every (params, query ids) it is asked and answers from
    ``targets`` (queries in ``unscored`` are left out, as residual evaluation does)."""

    def __init__(self, targets: Mapping[str, float], unscored: Sequence[str] = ()) -> None:
        self.targets = dict(targets)
        self.unscored = set(unscored)
        self.calls: list[tuple[dict[str, float], tuple[str, ...]]] = []

    def __call__(self, params: Mapping[str, float], ids: Sequence[str]) -> dict[str, float]:
        self.calls.append((dict(params), tuple(ids)))
        beta = params["beta"]
        return {q: -((beta - self.targets[q]) ** 2) for q in ids if q not in self.unscored}


def _search(scorer: Spy, *, seed: int = 0, trials: int = 6, folds: int = 3) -> CrossValidation:
    return cross_validate(
        IDS,
        scorer,
        SPACE,
        {"beta": 0.75, "gamma": 0.15},
        folds=folds,
        trials=trials,
        startup_trials=3,
        seed=seed,
    )


def test_each_fold_is_tuned_on_its_training_queries_only() -> None:
    spy = Spy(TARGETS)
    cv = _search(spy, trials=6)
    calls = iter(spy.calls)
    for fold in cv.folds:
        assert set(fold.train).isdisjoint(fold.heldout)
        assert sorted(fold.train + fold.heldout) == sorted(IDS)
        for _ in range(6):  # the study: every trial sees the training queries, nothing else
            _params, asked = next(calls)
            assert asked == fold.train
        chosen, asked = next(calls)  # then its choice, held out
        assert (chosen, asked) == (dict(fold.chosen.params), fold.heldout)
        default, asked = next(calls)  # and the default, held out
        assert (default, asked) == ({"beta": 0.75, "gamma": 0.15}, fold.heldout)
    assert next(calls, None) is None


def test_a_folds_choice_does_not_move_when_its_held_out_queries_change() -> None:
    first = _search(Spy(TARGETS))
    heldout = first.folds[0].heldout
    changed = {q: (2.0 if q in heldout else t) for q, t in TARGETS.items()}
    second = _search(Spy(changed))
    fold0 = [t for t in first.trials if t.fold == 0]
    assert [t for t in second.trials if t.fold == 0] == fold0
    assert second.folds[0].chosen == first.folds[0].chosen
    assert second.folds[0].tuned != first.folds[0].tuned  # its held-out scores did move
    # ... and the other folds, which train on those queries, saw the change
    others = [t.score for t in first.trials if t.fold > 0]
    assert [t.score for t in second.trials if t.fold > 0] != others


def test_the_chosen_trial_is_the_best_mean_and_the_earliest_on_a_tie() -> None:
    spy = Spy(TARGETS)
    cv = _search(spy, trials=8)
    for fold in cv.folds:
        mine = [t for t in cv.trials if t.fold == fold.fold]
        best = max(t.score for t in mine)
        assert fold.chosen == next(t for t in mine if t.score == best)
        # the training score is the plain mean over the training queries, worked here
        beta = fold.chosen.params["beta"]
        expected = sum(-((beta - TARGETS[q]) ** 2) for q in fold.train) / len(fold.train)
        assert fold.chosen.score == pytest.approx(expected, abs=1e-12)

    class Flat(Spy):
        def __call__(self, params: Mapping[str, float], ids: Sequence[str]) -> dict[str, float]:
            return dict.fromkeys(ids, 0.25)

    flat = _search(Flat(TARGETS), trials=4)
    assert [f.chosen.number for f in flat.folds] == [0, 0, 0]


def test_unscored_queries_leave_the_mean() -> None:
    cv = _search(Spy(TARGETS, unscored=["q00", "q01", "q02"]), trials=2)
    for trial in cv.trials:
        fold = cv.folds[trial.fold]
        assert trial.queries == len([q for q in fold.train if q not in {"q00", "q01", "q02"}])


def test_the_search_is_deterministic_for_a_seed() -> None:
    def sequence(seed: int) -> list[tuple[int, int, tuple[tuple[str, float], ...], float]]:
        cv = _search(Spy(TARGETS), seed=seed, trials=10)
        return [(t.fold, t.number, tuple(t.params.items()), t.score) for t in cv.trials]

    assert sequence(0) == sequence(0)
    assert sequence(1) != sequence(0)
    for _fold, _number, params, _score in sequence(0):  # on the grid, rounded
        for _name, value in params:
            assert round(value / 0.05) * 0.05 == pytest.approx(value, abs=1e-9)
            assert value == round(value, 10)


# -- a real tuning run on Cranfield ---------------------------------------------------------

FILES = (
    "tuning.csv", "folds.csv", "heldout.csv", "scores.parquet", "summary.parquet",
    "configs.csv", "feedback.parquet", "episodes.parquet", "documents.jsonl", "qrels.csv",
    "queries.csv",
)  # fmt: skip


def tune(runs: Path, *extra: str) -> Path:
    cfg, text = compose(
        [
            "+experiment=rocchio_tune",
            "experiment.queries=20",
            "experiment.tune.folds=2",
            "experiment.tune.trials=4",
            "experiment.tune.startup_trials=2",
            f"runs_dir={runs}",
            "progress=false",
            *extra,
        ]
    )
    return perform_tune(cfg, text, report=new_tuning_report).path


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tune(tmp_path_factory.mktemp("tune"), "workers=1")


@pytest.mark.slow
def test_a_tuning_run_is_identical_whatever_the_workers_and_moves_with_the_seed(
    tuned: Path, tmp_path: Path
) -> None:
    # their reports are not compared (the tuned run's is, below): not rendered
    again = tune(tmp_path / "a", "workers=2", "report=false")
    for name in FILES:
        assert (again / name).read_bytes() == (tuned / name).read_bytes(), name
    other = tune(tmp_path / "b", "workers=1", "seed=1", "report=false")
    folds = pd.read_csv(tuned / "heldout.csv", dtype={"query_id": str})
    moved = pd.read_csv(other / "heldout.csv", dtype={"query_id": str})
    assert list(folds["fold"]) != list(moved["fold"])


@pytest.mark.slow
def test_the_run_holds_every_fold_and_trial(tuned: Path) -> None:
    ids = [str(q) for q in pd.read_csv(tuned / "queries.csv", dtype=str)["query_id"]]
    assert len(ids) == 20
    heldout = pd.read_csv(tuned / "heldout.csv", dtype={"query_id": str})
    assert sorted(heldout["query_id"]) == sorted(ids)  # every query held out once
    expected = assign_folds(ids, 2, seed=0)
    for fold, members in enumerate(expected):
        assert list(heldout.loc[heldout["fold"] == fold, "query_id"]) == list(members)
    trials = pd.read_csv(tuned / "tuning.csv")
    folds = pd.read_csv(tuned / "folds.csv")
    assert len(trials) == 2 * 4 and list(folds["fold"]) == [0, 1]
    assert list(folds["train_queries"]) == [10, 10] and list(folds["heldout_queries"]) == [10, 10]
    for row in folds.itertuples():
        mine = trials[trials["fold"] == row.fold]
        best = mine[mine["train_score"] == mine["train_score"].max()].iloc[0]  # earliest
        assert (row.trial, row.beta, row.gamma) == (best["trial"], best["beta"], best["gamma"])
        assert row.train_score == best["train_score"]
        assert list(mine["chosen"]) == [int(t == row.trial) for t in mine["trial"]]
        assert (mine["train_n"] <= row.train_queries).all()
    # the random startup points come first and are the same in both folds (one sampler seed)
    first = trials[trials["trial"] < 2]
    assert first[first["fold"] == 0][["beta", "gamma"]].values.tolist() == (
        first[first["fold"] == 1][["beta", "gamma"]].values.tolist()
    )
    configs = pd.read_csv(tuned / "configs.csv")
    assert list(configs["config_id"]) == ["c00", "c01"]
    assert configs.loc[0, "beta"] == 0.75 and math.isnan(configs.loc[1, "beta"])


def _gains(heldout: pd.DataFrame) -> pd.DataFrame:
    paired = heldout.dropna()
    return pd.DataFrame(
        {
            "fold": paired["fold"],
            "query_id": paired["query_id"],
            "default": paired["default"] - paired["default_control"],
            "tuned": paired["tuned"] - paired["tuned_control"],
        }
    )


@pytest.mark.slow
def test_the_tuning_run_stores_the_analysis_its_report_shows(tuned: Path, tmp_path: Path) -> None:
    from evidence_bench.report.page import report

    copy = tmp_path / tuned.name
    shutil.copytree(tuned, copy)
    page = (copy / "report.html").read_text("utf-8")
    path, note = report(copy)  # the run's own stored analysis, its key matching
    assert note == "analysis read from analysis.json.gz (its key matches the run)"
    assert path.read_text("utf-8") == page
    (copy / "analysis.json.gz").unlink()
    path, note = report(copy)  # computed anew from the files: the same page
    assert note.startswith("analysis computed (no analysis.json.gz)")
    assert path.read_text("utf-8") == page


def test_held_out_gains_match_an_independent_recomputation(tuned: Path) -> None:
    heldout = pd.read_csv(tuned / "heldout.csv", dtype={"query_id": str})
    gains = _gains(heldout)
    # heldout.csv is per_query.csv's expand and deep_control (residual nDCG@10, round 1)
    csv = exported(tuned, "csv", out=tuned.parent / f"{tuned.name}-csv")
    pq = pd.read_csv(csv / "per_query.csv", dtype={"query_id": str, "config_id": str})
    cell = pq[(pq["round"] == 1) & (pq["eval_mode"] == "residual") & (pq["measure"] == "nDCG@10")]
    wide = cell.pivot_table(
        index=["config_id", "query_id"], columns="stage", values="value", aggfunc="first"
    )
    for config_id, column in (("c00", "default"), ("c01", "tuned")):
        mine = wide.loc[config_id]
        for row in gains.itertuples():
            value = mine.loc[row.query_id, "expand"] - mine.loc[row.query_id, "deep_control"]
            assert getattr(row, column) == pytest.approx(value, abs=1e-9)
    # folds.csv: per-fold means over the queries scored in both
    folds = pd.read_csv(tuned / "folds.csv")
    for row in folds.itertuples():
        mine = gains[gains["fold"] == row.fold]
        assert row.heldout_n == len(mine)
        assert row.heldout_score == pytest.approx(mine["tuned"].mean(), abs=1e-9)
        assert row.default_heldout_score == pytest.approx(mine["default"].mean(), abs=1e-9)
        assert row.heldout_gain == pytest.approx((mine["tuned"] - mine["default"]).mean(), 1e-9)
    # with 2 folds, one fold's training queries are the other's held-out ones
    assert folds.loc[0, "train_score"] >= folds.loc[1, "heldout_score"] - 1e-9
    # the report's pooled comparison, against scipy
    html = (tuned / "report.html").read_text()
    pooled = re.search(r'<div class="best" id="tuning-pooled"([^>]*)>', html)
    assert pooled is not None
    attrs = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', pooled.group(1)))
    difference = gains["tuned"] - gains["default"]
    n = len(difference)
    low, high = stats.t.interval(
        0.95, n - 1, loc=difference.mean(), scale=stats.sem(difference.to_numpy())
    )
    assert int(attrs["n"]) == n
    assert float(attrs["gain"]) == pytest.approx(difference.mean(), abs=1e-5)
    assert float(attrs["ci-low"]) == pytest.approx(low, abs=1e-5)
    assert float(attrs["ci-high"]) == pytest.approx(high, abs=1e-5)
    p = stats.ttest_rel(gains["tuned"], gains["default"]).pvalue
    assert float(attrs["p-t"]) == pytest.approx(p, rel=1e-4)
    assert 0 < float(attrs["p-randomization"]) <= 1
    # and the per-fold table shows each fold's choice
    for row in folds.itertuples():
        assert f'<tr data-fold="{row.fold}"' in html
    assert 'id="tuning"' in html and 'href="#tuning"' in html


# -- settings -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("experiment.tune.folds=1", "experiment.tune.folds=1 must be between 2 and 100"),
        ("experiment.tune.trials=0", "experiment.tune.trials=0 must be between 1 and 1000"),
        (
            "experiment.tune.startup_trials=0",
            "experiment.tune.startup_trials=0 must be between 1 and 1000",
        ),
        ("experiment.tune.space.beta=[1,0]", "experiment.tune.space.beta=[1.0, 0.0] must be"),
        ("+experiment.tune.space.w_r=[0,1]", "experiment.tune.space.w_r: not a numeric"),
        ("experiment.tune.step=0.3", "experiment.tune.space.beta=[0, 8] is not a whole number"),
        ("experiment.tune.step=-1", "experiment.tune.step=-1.0 must be a positive number"),
        ("experiment.tune.stage=initial", "experiment.tune.stage='initial' is not valid"),
        ("experiment.tune.policy=noisy", "experiment.tune.policy='noisy' is not a user"),
        ("+experiment.grid.beta=[0.5,1]", "experiment.grid: a tuning experiment searches"),
        (
            "experiment.tune.space.beta=[-1,1]",
            "experiment.tune.space: beta must be a finite number >= 0, got -1.0",
        ),
    ],
)
def test_bad_settings_name_their_key(override: str, message: str) -> None:
    cfg, _text = compose(["+experiment=rocchio_tune", override])
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        plan_tuning(cfg)


def test_more_folds_than_queries_fails_before_any_episode(tmp_path: Path) -> None:
    cfg, text = compose(
        ["+experiment=rocchio_tune", "experiment.queries=3", f"runs_dir={tmp_path}"]
    )
    with pytest.raises(ConfigurationError, match=r"experiment\.tune\.folds=5 is more than the 3"):
        perform_tune(cfg, text)
    assert not [p for p in tmp_path.rglob("*") if p.name != "rocchio_tune"]  # no run left


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evidence_bench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_cli_runs_a_tuning_experiment_and_fails_in_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the bad setting in this process (main answers as the command line would), the run in one
    args = ("run", "+experiment=rocchio_tune", "experiment.tune.folds=1")
    done = main_in_process(*args, capfd=capfd, monkeypatch=monkeypatch)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "evidence_bench: experiment.tune.folds=1 must be between 2 and 100"
    )
    done = cli(
        "run",
        "+experiment=rocchio_tune",
        "experiment.queries=6",
        "experiment.tune.folds=2",
        "experiment.tune.trials=1",
        "experiment.tune.startup_trials=1",
        "report=false",
        "progress=false",
        f"runs_dir={tmp_path}",
    )
    assert done.returncode == 0, done.stderr
    run = tmp_path / "rocchio_tune" / "latest"
    assert (run / "folds.csv").is_file() and (run / "manifest.json").is_file()
    assert f"run: {run.resolve()}" in done.stdout


def test_a_choice_at_or_next_to_an_end_of_its_interval_is_flagged() -> None:
    from evidence_bench.report.tuning import _at_bound

    settings = {"space": {"beta": [0.0, 2.0], "gamma": [0.0, 1.0]}, "step": 0.05}
    # 1.95 is one step from 2.0; 0.5 is ten steps from either end of [0, 1]
    assert _at_bound({"beta": 1.95, "gamma": 0.5}, settings) == ["beta"]
    assert _at_bound({"beta": 1.0, "gamma": 0.0}, settings) == ["gamma"]
    assert _at_bound({"beta": 1.9, "gamma": 0.1}, settings) == []
    # continuous: within 2% of the width (0.04 of 2, 0.02 of 1)
    continuous = {**settings, "step": None}
    assert _at_bound({"beta": 0.03, "gamma": 0.97}, continuous) == ["beta"]


@pytest.mark.slow
def test_trials_are_compared_on_the_same_queries_in_a_run_of_two_rounds(tmp_path: Path) -> None:
    """The objective is round 1's, as documented: there the residual queries are the same
    for every setting. Round 2's depend on what round 1 found with each setting, so trials
    were scored on different queries (26 to 28 of a fold's 32 on 40 queries, and a fold
    chose a trial that another beat on the queries both keep)."""
    run = tune(tmp_path, "workers=1", "report=false", "experiment.rounds=2")
    settings = json.loads((run / "manifest.json").read_text())["tuning"]
    assert settings["objective"]["round"] == 1
    trials = pd.read_csv(run / "tuning.csv")
    assert (trials.groupby("fold")["train_n"].nunique() == 1).all()


@pytest.mark.slow
def test_a_search_that_tells_no_setting_apart_says_so(tuned: Path, tmp_path: Path) -> None:
    """Frozen evaluation pins the top 10 ranks, so nDCG@10 cannot change: every trial scores
    0 and the earliest is "tuned". The report says each such fold's choice is arbitrary
    (and marks the tie); a search whose trials differ says nothing of the kind."""
    flat = tune(tmp_path, "workers=1", "eval.primary_mode=frozen")
    trials = pd.read_csv(flat / "tuning.csv")
    assert (trials["train_score"] == 0).all()  # the premise: nothing can change
    page = (flat / "report.html").read_text()
    assert '<p class="note tuning-flat">Every trial of fold 0, 1 reached the same' in page
    assert page.count(">tie of 4</span>") == 2
    assert "tuning-flat" not in (tuned / "report.html").read_text()
    terminal = tuning_table(flat)  # the terminal says so too
    assert "every trial of fold 0, 1 reached the same training score: its choice" in terminal
    assert "every trial" not in tuning_table(tuned)
    assert "mean optimism (train − held-out beyond the default weights' own)" in terminal


def test_optimism_is_the_gap_beyond_the_default_weights_own() -> None:
    """Two folds of two queries. The default's gains: a 0.1, b 0.3 (fold 0, mean 0.2),
    c 0.0, d 0.2 (fold 1, mean 0.1). Fold 0 chose on c, d (training score 0.25) and scored
    0.22 on a, b: a raw gap of 0.03, but the default itself does 0.1 - 0.2 = -0.1 on those
    sets, so the optimism is 0.03 + 0.1 = 0.13. Fold 1: 0.35 - 0.12 = 0.23 against the
    default's 0.2 - 0.1 = 0.1: 0.13. The raw gaps (0.03, 0.23) are which queries each holds."""
    from evidence_bench.report.tuning import Tuning, tuning_view

    heldout = pd.DataFrame(
        {
            "fold": [0, 0, 1, 1],
            "query_id": ["a", "b", "c", "d"],
            "default_control": [0.0] * 4,
            "default": [0.1, 0.3, 0.0, 0.2],
            "tuned_control": [0.0] * 4,
            "tuned": [0.2, 0.24, 0.04, 0.2],
        }
    )
    folds = pd.DataFrame(
        {
            "fold": [0, 1], "train_queries": [2, 2], "heldout_queries": [2, 2],
            "trial": [0, 0], "beta": [1.0, 1.0], "gamma": [0.0, 0.0],
            "train_score": [0.25, 0.35], "heldout_n": [2, 2], "heldout_score": [0.22, 0.12],
            "default_heldout_score": [0.2, 0.1], "heldout_gain": [0.02, 0.02],
        }
    )  # fmt: skip
    trials = pd.DataFrame(
        {"fold": [0, 1], "trial": [0, 0], "beta": [1.0, 1.0], "gamma": [0.0, 0.0],
         "train_score": [0.25, 0.35], "train_n": [2, 2], "chosen": [1, 1]}
    )  # fmt: skip
    settings = {"space": {"beta": [0.0, 2.0], "gamma": [0.0, 1.0]}, "step": 0.05, "trials": 1}
    view = tuning_view(Tuning(settings, 0, trials, folds, heldout), trials=200)
    assert [f["optimism"] for f in view["folds"]] == pytest.approx([0.13, 0.13])
    assert view["pooled"]["optimism"] == pytest.approx(0.13)
    # the tuned weights gain 0.1, 0.1, 0.1, 0.1 over their control: t is undefined, so
    # the interval is too (not [0.1, 0.1]); the default's gains vary, so theirs is a t one
    same = heldout.assign(tuned=[0.1, 0.1, 0.1, 0.1])
    pooled = tuning_view(Tuning(settings, 0, trials, folds, same), trials=200)["pooled"]
    assert pooled["tuned"] == pytest.approx(0.1)
    assert math.isnan(pooled["tuned_ci_low"]) and math.isnan(pooled["tuned_ci_high"])
    assert not math.isnan(pooled["default_ci_low"])
