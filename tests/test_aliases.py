"""Duplicate sweep points: configs with the same effective parameters run once, as aliases.

Each engine part says which of its settings its math cannot tell apart
(``effective_params()``); the plan groups configs by those, runs one of each group, and
``configs.csv`` keeps every config asked for with ``alias_of``. The runs on Cranfield below
are what prove the invariance claims: an alias run on its own gives, per query, exactly the
numbers of the config it was aliased to.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.engine.base import Label
from evidence_bench.engine.boost import BoostRelevant
from evidence_bench.engine.embedding import LsaEmbedder
from evidence_bench.engine.livefetch import LiveFetchRanker
from evidence_bench.engine.params import part_key, scale_free
from evidence_bench.engine.ranking import TfidfRocchioRanker
from evidence_bench.engine.refiner import LexicalRefiner
from evidence_bench.engine.term_rocchio import TermRocchioRefiner
from evidence_bench.engine.text import Analyzer
from evidence_bench.engine.vector_rocchio import VectorRocchioRanker
from evidence_bench.errors import FeedbackError
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.run import perform_run
from evidence_bench.report import load_run, render_report
from evidence_bench.runs.data import merge_runs
from tests.conftest import exported

# --- the canonical form, worked by hand ------------------------------------------------------


def test_scale_free_divides_by_the_first_weight_that_is_not_zero() -> None:
    assert scale_free(2.0, 1.5, 0.3) == (1.0, 0.75, 0.15)
    # 0.45 / 3 is 0.15000000000000002 in floats: rounded to 12 significant digits, 0.15.
    assert scale_free(3.0, 2.25, 0.45) == (1.0, 0.75, 0.15)
    assert scale_free(0.5, 0.25, 0.15) == (1.0, 0.5, 0.3)
    assert scale_free(0.0, 2.0, 1.0) == (0.0, 1.0, 0.5)
    assert scale_free(0.0, 0.0, 0.7) == (0.0, 0.0, 1.0)
    assert scale_free(0.0, 0.0, 0.0) == (0.0, 0.0, 0.0)


def _weights(part: Any) -> tuple[float, float, float]:
    params = part.effective_params()
    return (params["alpha"], params["beta"], params["gamma"])


@pytest.mark.parametrize(
    ("part", "expected"),
    [
        (TfidfRocchioRanker(2.0, 1.5, 0.3), (1.0, 0.75, 0.15)),
        (TfidfRocchioRanker(3.0, 2.25, 0.45), (1.0, 0.75, 0.15)),
        (TfidfRocchioRanker(4.0, 0.0, 0.0), (1.0, 0.0, 0.0)),  # the query alone
        (TfidfRocchioRanker(0.0, 2.0, 1.0), (0.0, 1.0, 0.5)),  # no query: its own form
        (TfidfRocchioRanker(0.0, 0.0, 0.7), (0.0, 0.0, 0.0)),  # clamped to nothing
        (VectorRocchioRanker(0.5, 0.25, 0.15), (1.0, 0.5, 0.3)),
        (VectorRocchioRanker(0.0, 0.0, 0.7), (0.0, 0.0, 1.0)),  # not clamped: away from push
        (LiveFetchRanker(alpha=3.0, beta=2.25, gamma=0.45), (1.0, 0.75, 0.15)),
        (LiveFetchRanker(alpha=0.0, beta=0.0, gamma=0.7), (0.0, 0.0, 0.0)),  # R' = 0
        (LiveFetchRanker(w_r=0.0, alpha=2.0, beta=1.0, gamma=0.5), (0.0, 0.0, 0.0)),
    ],
)
def test_effective_rocchio_weights(part: Any, expected: tuple[float, float, float]) -> None:
    assert _weights(part) == expected


_STEMLESS = Analyzer(stemmer=None)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        (TfidfRocchioRanker(2.0, 1.5, 0.3), TfidfRocchioRanker(1.0, 0.75, 0.15), True),
        (TfidfRocchioRanker(0.0, 0.0, 0.7), TfidfRocchioRanker(0.0, 0.0, 0.0), True),
        # alpha = 0 never meets alpha > 0: without feedback one ranks, the other cannot
        (TfidfRocchioRanker(0.0, 1.0, 0.5), TfidfRocchioRanker(1.0, 1.0, 0.5), False),
        # gamma counts even where some user never marks a result irrelevant
        (TfidfRocchioRanker(1.0, 0.75, 0.0), TfidfRocchioRanker(1.0, 0.75, 0.15), False),
        (TfidfRocchioRanker(analyzer=_STEMLESS), TfidfRocchioRanker(), False),
        (VectorRocchioRanker(0.0, 0.0, 0.7), VectorRocchioRanker(0.0, 0.0, 0.0), False),
        (VectorRocchioRanker(0.0, 0.0, 0.7), VectorRocchioRanker(0.0, 0.0, 2.0), True),
        (
            VectorRocchioRanker(embedder=LsaEmbedder(dimensions=8)),
            VectorRocchioRanker(embedder=LsaEmbedder(dimensions=16)),
            False,
        ),
        (LiveFetchRanker(alpha=2.0, beta=1.5, gamma=0.3), LiveFetchRanker(), True),
        # S's weights are not folded: its ties are decided on S rounded to 12 decimals
        (LiveFetchRanker(w_r=1.1, w_f=0.5, w_t=0.4, w_dup=0.7), LiveFetchRanker(), False),
        (LiveFetchRanker(w_r=0.0, beta=2.0), LiveFetchRanker(w_r=0.0, gamma=0.0), True),
        # the boost wraps the same ranking, and is not the ranking unwrapped
        (
            BoostRelevant(TfidfRocchioRanker(2.0, 1.5, 0.3)),
            BoostRelevant(TfidfRocchioRanker()),
            True,
        ),
        (BoostRelevant(TfidfRocchioRanker()), TfidfRocchioRanker(), False),
        (LexicalRefiner(max_terms=0, analyzer=_STEMLESS), LexicalRefiner(max_terms=0), True),
        (LexicalRefiner(max_terms=3), LexicalRefiner(max_terms=4), False),
        (TermRocchioRefiner(beta=0.0, gamma=0.3), TermRocchioRefiner(max_terms=0), True),
        # term Rocchio's weights scale with (beta, gamma): kept apart (see its docstring)
        (TermRocchioRefiner(beta=1.5, gamma=0.3), TermRocchioRefiner(beta=0.75, gamma=0.15), False),
    ],
)
def test_parts_alias_only_where_their_math_cannot_tell_them_apart(
    a: Any, b: Any, same: bool
) -> None:
    assert (part_key(a) == part_key(b)) is same


def test_a_refiner_that_adds_nothing_returns_the_query_whatever_its_other_settings() -> None:
    candidates = [
        Evidence(title="heat transfer slab", url="https://example.org/doc/0", snippet="", rank=1),
        Evidence(title="boundary layer", url="https://example.org/doc/1", snippet="", rank=2),
    ]
    feedback = {candidates[0].key: Label.RELEVANT, candidates[1].key: Label.IRRELEVANT}
    for refiner in (TermRocchioRefiner(beta=0.0, gamma=0.3), LexicalRefiner(max_terms=0)):
        refined = refiner.refine("conduction", candidates, feedback)
        assert (refined.query, refined.added_terms) == ("conduction", ())


# --- the invariance itself, on random candidates and feedback ----------------------------------

_WORDS = ["heat", "slab", "wing", "lift", "shock", "wave", "flow"]
_WEIGHT = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 3.0])


def _ranking(ranker: Any, query: str, candidates: list[Evidence], feedback: Any) -> list[str]:
    try:
        return [item.url for item in ranker.rank(query, candidates, feedback)]
    except FeedbackError:  # vector Rocchio refuses feedback it cannot use: so must its alias
        return ["FeedbackError"]


# No deadline: the first LiveFetch call loads the public suffix list, on a shared machine.
@settings(deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(" ".join),
        min_size=1,
        max_size=8,
    ),
    st.data(),
    st.tuples(_WEIGHT, _WEIGHT, _WEIGHT),
    st.integers(min_value=-3, max_value=3),
    st.sampled_from(["tfidf", "vector", "livefetch"]),
)
def test_rankers_with_equal_effective_params_rank_alike(
    titles: list[str],
    data: st.DataObject,
    weights: tuple[float, float, float],
    exponent: int,
    kind: str,
) -> None:
    """(alpha, beta, gamma) against c·(alpha, beta, gamma): the same key, the same ranking.

    c is a power of two, which scales floats exactly, so this checks the algebra (clamping,
    normalization, the alpha = 0 cases) with no rounding in the way; the runs on Cranfield
    below check factors such as 3 and 0.5 in floats.
    """
    make = {
        "tfidf": lambda a, b, g: TfidfRocchioRanker(a, b, g),
        "vector": lambda a, b, g: VectorRocchioRanker(a, b, g, embedder=LsaEmbedder(4)),
        "livefetch": lambda a, b, g: LiveFetchRanker(alpha=a, beta=b, gamma=g),
    }[kind]
    candidates = [
        Evidence(title=title, url=f"https://example.org/doc/{n}", snippet="", rank=n + 1)
        for n, title in enumerate(titles)
    ]
    keys = [item.key for item in candidates]
    feedback = data.draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(list(Label))))
    query = data.draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=3).map(" ".join))
    factor = 2.0**exponent
    one, scaled = make(*weights), make(*(factor * w for w in weights))
    assert part_key(one) == part_key(scaled)
    for marks in (feedback, {}):
        assert _ranking(one, query, candidates, marks) == _ranking(scaled, query, candidates, marks)


@settings(deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=5).map(" ".join),
        min_size=1,
        max_size=8,
    ),
    st.data(),
    _WEIGHT,
    _WEIGHT,
)
def test_the_collapsed_edge_cases_rank_as_their_canonical_form(
    titles: list[str], data: st.DataObject, alpha: float, gamma: float
) -> None:
    """TF-IDF alpha = beta = 0 clamps q' to nothing, whatever gamma; LiveFetch with w_r = 0
    never lets R' reach S, whatever the Rocchio weights."""
    candidates = [
        Evidence(title=title, url=f"https://example.org/doc/{n}", snippet="", rank=n + 1)
        for n, title in enumerate(titles)
    ]
    keys = [item.key for item in candidates]
    feedback = data.draw(st.dictionaries(st.sampled_from(keys), st.sampled_from(list(Label))))
    query = data.draw(st.sampled_from(_WORDS))
    pairs = [
        (TfidfRocchioRanker(0.0, 0.0, gamma), TfidfRocchioRanker(0.0, 0.0, 0.0)),
        (
            LiveFetchRanker(w_r=0.0, alpha=alpha, beta=1.0, gamma=gamma),
            LiveFetchRanker(w_r=0.0, alpha=0.0, beta=0.0, gamma=0.0),
        ),
    ]
    for ranker, canonical in pairs:
        assert part_key(ranker) == part_key(canonical)
        assert _ranking(ranker, query, candidates, feedback) == _ranking(
            canonical, query, candidates, feedback
        )


# --- the plan ------------------------------------------------------------------------------------


def _grid(alpha: str, beta: str, gamma: str) -> list[str]:
    return [f"+experiment.grid.alpha={alpha}", f"+experiment.grid.beta={beta}",
            f"+experiment.grid.gamma={gamma}"]  # fmt: skip


def test_the_old_27_point_grid_holds_25_distinct_configs() -> None:
    """alpha {0.5, 1, 2} × beta {0.25, 0.75, 1.5} × gamma {0, 0.15, 0.5}, in that order
    (c00 is alpha 0.5, beta 0.25, gamma 0; gamma varies fastest). By hand, (beta/alpha,
    gamma/alpha) repeats only where gamma = 0: c03 (0.5, 0.75, 0) and c15 (1, 1.5, 0) are
    both (1, 1.5, 0); c12 (1, 0.75, 0) and c24 (2, 1.5, 0) are both (1, 0.75, 0). Any
    gamma > 0 divided by a different alpha differs. (A user who never marks a result
    irrelevant cannot tell the gammas apart either, but that is the user, not the engine.)"""
    cfg, _ = compose(["+experiment=smoke", *_grid("[0.5,1.0,2.0]", "[0.25,0.75,1.5]",
                                                  "[0.0,0.15,0.5]")])  # fmt: skip
    plan = plan_run(cfg)
    assert len(plan.asked) == 27
    assert plan.aliases == {"c15": "c03", "c24": "c12"}
    assert [e.config_id for e in plan.engines] == [
        f"c{i:02d}" for i in range(27) if i not in (15, 24)
    ]


def test_the_rocchio_sweep_grid_has_no_two_configs_alike() -> None:
    cfg, _ = compose(["+experiment=rocchio_sweep"])
    plan = plan_run(cfg)
    assert len(plan.asked) == len(plan.engines) == 24
    assert plan.aliases == {}
    assert plan.swept == ("beta", "gamma")
    assert {dict(e.ranker_params)["alpha"] for e in plan.engines} == {1.0}


# --- runs on Cranfield ---------------------------------------------------------------------------


def _run(tmp_path: Path, name: str, *extra: str, rounds: int = 2, queries: int = 8) -> Path:
    cfg, text = compose(
        [
            "+experiment=smoke",
            "+policy@policies.noisy=noisy",  # marks relevant and irrelevant: gamma counts
            f"experiment.rounds={rounds}",
            f"experiment.queries={queries}",
            f"runs_dir={tmp_path / name}",
            "workers=1",
            "progress=false",
            "report=false",
            *extra,
        ]
    )
    return exported(perform_run(cfg, text).path)


def _configs(*points: str) -> str:
    return "experiment.configs=[" + ",".join("{ranker:{" + p + "}}" for p in points) + "]"


def _without_config(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.drop(columns="config_id").reset_index(drop=True)


def _trec(run_dir: Path, config_id: str) -> dict[str, list[str]]:
    runs = {}
    for path in sorted((run_dir / "trec").glob(f"{config_id}.*.run.gz")):
        lines = gzip.decompress(path.read_bytes()).decode().splitlines()
        runs[path.name.split(".", 1)[1]] = [" ".join(line.split()[:5]) for line in lines]
    return runs


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ranker", "asked", "alias"),
    [
        ("tfidf_rocchio", "alpha:1.0,beta:0.75,gamma:0.15", "alpha:3.0,beta:2.25,gamma:0.45"),
        ("tfidf_rocchio", "alpha:0.0,beta:1.0,gamma:0.5", "alpha:0.0,beta:2.0,gamma:1.0"),
        ("livefetch", "alpha:1.0,beta:0.75,gamma:0.15", "alpha:3.0,beta:2.25,gamma:0.45"),
        ("vector_rocchio", "alpha:1.0,beta:0.5,gamma:0.3", "alpha:0.5,beta:0.25,gamma:0.15"),
    ],
)
def test_an_alias_runs_once_and_its_numbers_are_what_it_gives_alone(
    tmp_path: Path, ranker: str, asked: str, alias: str
) -> None:
    together = _run(tmp_path, "together", f"ranker={ranker}", _configs(asked, alias))
    manifest = json.loads((together / "manifest.json").read_text())
    assert manifest["configs"] == {"asked": 2, "distinct": 1, "aliases": {"c01": "c00"}}
    assert manifest["episodes"] == 8 * 2  # 8 queries × 2 users × 1 distinct config
    configs = pd.read_csv(together / "configs.csv", dtype=str, keep_default_na=False)
    assert list(configs["config_id"]) == ["c00", "c01"]
    assert list(configs["alias_of"]) == ["", "c00"]
    per_query = pd.read_csv(together / "per_query.csv", dtype={"query_id": str})
    feedback = pd.read_csv(together / "feedback.csv", dtype=str)
    assert set(per_query["config_id"]) == set(feedback["config_id"]) == {"c00"}
    assert set(pd.read_csv(together / "summary.csv")["config_id"]) == {"c00"}
    assert {p.name.split(".")[0] for p in (together / "trec").glob("*.run.gz")} == {"c00"}

    alone = _run(tmp_path, "alone", f"ranker={ranker}", _configs(alias))
    assert set(pd.read_csv(alone / "configs.csv")["label"]) == {configs["label"][1]}
    alone_pq = pd.read_csv(alone / "per_query.csv", dtype={"query_id": str})
    assert len(alone_pq) == len(per_query) > 0
    pd.testing.assert_frame_equal(_without_config(alone_pq), _without_config(per_query))
    alone_fb = pd.read_csv(alone / "feedback.csv", dtype=str)
    pd.testing.assert_frame_equal(_without_config(alone_fb), _without_config(feedback))
    assert _trec(alone, "c00") == _trec(together, "c00")
    # a real test of the marks: both users gave negative feedback, so gamma was used
    assert {"relevant", "irrelevant"} <= set(feedback["label"])


@pytest.mark.slow
def test_the_report_shows_the_aliases_and_hatches_their_cells(tmp_path: Path) -> None:
    # alpha {1, 2} × beta {0.75, 1.5} × gamma {0}: c03 (2, 1.5, 0) is c00 (1, 0.75, 0)
    run_dir = _run(
        tmp_path, "report", *_grid("[1.0,2.0]", "[0.75,1.5]", "[0.0]"), rounds=1, queries=5
    )
    analysis_path = render_report(run_dir, trials=200)
    html = analysis_path.read_text()
    assert "3 configurations (4 asked, 1 with the effective parameters of another)" in html
    assert "1 of the 4 configurations asked for has the effective parameters" in html
    assert "c03 = c00" in html
    start = html.index('<section id="sweep">')
    sweep = html[start : html.index("</section>", start)]
    assert "= c00" in sweep  # the hatched cell names the config it shows
    assert "Hatched cells are aliases" in sweep

    data = load_run(run_dir)
    assert data.aliases == {"c03": "c00"}
    merged = merge_runs([("j0:", data), ("j1:", data)], tmp_path / "multirun")
    assert merged.aliases == {"j0:c03": "j0:c00", "j1:c03": "j1:c00"}
    assert merged.manifest["configs"]["asked"] == 8
    assert merged.manifest["configs"]["distinct"] == 6


@pytest.mark.slow
def test_every_pair_of_the_rocchio_sweep_grid_differs_on_cranfield(tmp_path: Path) -> None:
    """The first 30 judged Cranfield queries, one round, residual evaluation (the report's),
    the noisy user (who marks results relevant and irrelevant, so gamma is used): every two
    points of the grid give a different value for some query. When the grid was chosen the
    closest pairs (beta 8 with gamma 0 and 0.25, or 0.25 and 1) differed on 5 of the 30.
    A beta of 16 was left out: with gamma 0 and 0.25 it differed on 1."""
    cfg, text = compose(
        [
            "+experiment=rocchio_sweep",
            "~policies.oracle",
            "experiment.queries=30",
            "experiment.rounds=1",
            "eval.modes=[residual]",
            "eval.primary_mode=residual",
            f"runs_dir={tmp_path}",
            "workers=1",
            "progress=false",
            "report=false",
        ]
    )
    run_dir = exported(perform_run(cfg, text).path, "csv")
    per_query = pd.read_csv(run_dir / "per_query.csv", dtype={"query_id": str})
    assert per_query["query_id"].nunique() == 30
    values = per_query.set_index(
        ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure"]
    )["value"].unstack("config_id")
    assert values.shape[1] == 24
    alike = [
        (a, b)
        for a, b in itertools.combinations(values.columns, 2)
        if ((values[a] - values[b]).abs() > 0).sum() == 0
    ]
    assert alike == []
