"""``_fixed_cells`` on a frame small enough to work by hand, through each of its paths: the
fast one by codes (categorical keys, feedback rounds rising) and the per-episode loop (plain
string keys; feedback rows not in round order), which must give the same set."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.experiment import rundir
from evidence_bench.experiment.rundir import _fixed_cells
from evidence_bench.runs.store import (
    FEEDBACK_COLUMNS,
    PER_QUERY_COLUMNS,
    SUMMARY_KEYS,
    feedback_frame,
    read_tables,
)
from tests.conftest import CRANFIELD15, shared_run

A, B, C, D = (f"https://x.test/{name}" for name in "abcd")
# q1: a relevant, b judged not relevant; q2: c relevant; d is unjudged (grade 0)
QRELS = {"q1": {A: 1, B: 0}, "q2": {C: 1}}
# (config, policy, query, round, url, rank): the documents examined, at the rank shown
FEEDBACK = [
    ("c1", "oracle", "q1", 1, B, 1),
    ("c1", "oracle", "q1", 2, A, 2),
    ("c1", "oracle", "q2", 1, C, 2),
    ("c1", "oracle", "q2", 2, D, 1),
    ("c1", "noisy", "q1", 1, B, 1),
    ("c2", "oracle", "q1", 1, A, 1),
    ("c2", "oracle", "q2", 2, C, 1),
]
EPISODES = [  # (config, policy, query) with rounds 0, 1, 2; c3 has no feedback at all
    ("c1", "oracle", "q1"),
    ("c1", "oracle", "q2"),
    ("c1", "noisy", "q1"),
    ("c2", "oracle", "q1"),
    ("c2", "oracle", "q2"),
    ("c3", "oracle", "q1"),
]
# Pins of an episode = its feedback of rounds <= its round; the frozen prefix = pins at
# 1..p. P@1 is fixed when p >= 1; RR when the prefix holds a relevant document, or (like
# P@1) when it holds every relevant one. A cell is fixed when fixed for each of its queries.
# - round 0: no pins anywhere, and each query has a relevant document: nothing fixed.
# - c1/oracle round 1: q1 prefix [b] (P@1 fixed, RR not: b is not relevant); q2 pins
#   {c: 2}, no rank 1, prefix empty (neither): the cells are not fixed.
# - c1/oracle round 2: q1 prefix [b, a], q2 prefix [d, c]: both hold a relevant document
#   at p >= 1, both measures fixed for both queries.
# - c1/noisy (q1 only): prefix [b] in rounds 1 and 2 (no round-2 feedback): P@1 only.
# - c2/oracle round 1: q1 prefix [a] (both), q2 no pins (neither): not fixed.
# - c2/oracle round 2: q1 prefix [a], q2 prefix [c]: both fixed.
# - c3: no feedback, no pins: nothing fixed.
FIXED = {
    ("c1", "oracle", 2, "P@1"),
    ("c1", "oracle", 2, "RR"),
    ("c1", "noisy", 1, "P@1"),
    ("c1", "noisy", 2, "P@1"),
    ("c2", "oracle", 2, "P@1"),
    ("c2", "oracle", 2, "RR"),
}


def _frames(categorical: bool, shuffled: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [
        (config, policy, query, round_, "rerank", mode, measure, 0.5)
        for config, policy, query in EPISODES
        for round_ in (0, 1, 2)
        for mode in ("frozen", "residual")  # residual rows are not judged
        for measure in ("P@1", "RR")
    ]
    keys = ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure"]
    per_query = pd.DataFrame(rows, columns=[*keys, "value"])
    per_query = per_query.sample(frac=1.0, random_state=1).reset_index(drop=True)
    feedback = pd.DataFrame(
        FEEDBACK, columns=["config_id", "policy", "query_id", "round", "url", "rank"]
    )
    if shuffled:  # rounds no longer rise within each (config, policy, query)
        feedback = feedback.iloc[[6, 1, 3, 0, 4, 2, 5]].reset_index(drop=True)
    if categorical:  # with categories unused and out of order, as a stored frame may have
        for key in ("config_id", "policy", "query_id", "stage", "eval_mode", "measure"):
            names = [*sorted(set(per_query[key]), reverse=True), "unused"]
            per_query[key] = pd.Categorical(per_query[key], categories=names)
        for key in ("config_id", "policy", "query_id", "url"):
            feedback[key] = feedback[key].astype("category")
    return per_query, feedback


@pytest.mark.parametrize("categorical", [True, False], ids=["categorical", "strings"])
@pytest.mark.parametrize("shuffled", [False, True], ids=["rising", "shuffled"])
def test_fixed_cells_by_hand(
    categorical: bool, shuffled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_query, feedback = _frames(categorical, shuffled)
    paths: list[bool] = []
    pinned = rundir._pinned_slices

    def spy(*args: Any) -> Any:
        found = pinned(*args)
        paths.append(found is not None)
        return found

    monkeypatch.setattr(rundir, "_pinned_slices", spy)
    fixed = _fixed_cells(per_query, feedback, QRELS)
    # the fast path only for categories with rising rounds; the loop otherwise
    assert paths == ([categorical] if not shuffled else [])
    cells = {
        (config, policy, round_, measure)
        for config, policy, _ in EPISODES
        for round_ in (0, 1, 2)
        for measure in ("P@1", "RR")
    }
    want = {
        (config, policy, round_, "rerank", "frozen", measure): (
            (config, policy, round_, measure) in FIXED
        )
        for config, policy, round_, measure in cells
    }
    got = {
        tuple(str(v) if isinstance(v, str) else int(v) for v in key): f for key, f in fixed.items()
    }
    assert got == want


# --- summarize_scores: every episode judged at once by codes ------------------------------


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which way summarize_scores judged: ``codes`` (every episode at once) or ``loop``."""
    paths: list[str] = []
    for name, path in (("_judged", "codes"), ("_fixed_cells", "loop")):
        original = getattr(rundir, name)

        def spy(*args: Any, _original: Any = original, _path: str = path) -> Any:
            paths.append(_path)
            return _original(*args)

        monkeypatch.setattr(rundir, name, spy)
    return paths


@pytest.mark.parametrize("categorical", [True, False], ids=["categorical", "strings"])
@pytest.mark.parametrize("shuffled", [False, True], ids=["rising", "shuffled"])
def test_summary_fixed_by_hand(
    categorical: bool, shuffled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """summarize_scores' ``fixed`` is the cells worked out above, whether every episode is
    judged at once (categories, rising rounds) or by ``_fixed_cells``' loop."""
    per_query, feedback = _frames(categorical, shuffled)
    paths = _spy(monkeypatch)
    summary = rundir.summarize_scores(per_query, feedback, QRELS)
    assert paths == (["codes"] if categorical and not shuffled else ["loop"])
    assert summary["fixed"].dtype == bool
    fixed = summary[summary["fixed"]]
    got = set(
        zip(
            *(fixed[c].astype(str) for c in ("config_id", "policy")),
            fixed["round"],
            fixed["measure"].astype(str),
            strict=True,
        )
    )
    assert got == FIXED  # residual cells are never fixed
    assert len(summary) == 4 * 3 * 2 * 2  # (config, policy) x rounds x modes x measures


# A document examined twice keeps its last rank; two documents shown at one position: the
# last one pins it (a dict of the rows keeps them so). Only q1: a relevant, b not.
TWICE = [
    ("c1", "oracle", "q1", 1, A, 1),
    ("c1", "oracle", "q1", 2, B, 2),
    ("c1", "oracle", "q1", 2, A, 3),  # a moves to 3: pins {a: 3, b: 2}, no position 1
    ("c2", "oracle", "q1", 1, B, 1),
    ("c2", "oracle", "q1", 1, A, 1),  # a at 1 after b at 1: pins {b: 1, a: 1} -> 1 is a
    ("c3", "oracle", "q1", 1, B, 1),  # no repeat: its group is judged by codes
    ("c3", "oracle", "q1", 2, A, 2),
]
# - c1 round 1: prefix [a]: P@1 and RR fixed; round 2: prefix empty: neither.
# - c2 rounds 1 and 2: prefix [a]: both (ranking by position alone would put b first: RR
#   not fixed).
# - c3 round 1: prefix [b]: P@1 only; round 2: prefix [b, a]: both.
TWICE_FIXED = {
    ("c1", 1, "P@1"),
    ("c1", 1, "RR"),
    ("c2", 1, "P@1"),
    ("c2", 1, "RR"),
    ("c2", 2, "P@1"),
    ("c2", 2, "RR"),
    ("c3", 1, "P@1"),
    ("c3", 2, "P@1"),
    ("c3", 2, "RR"),
}


@pytest.mark.parametrize("categorical", [True, False], ids=["categorical", "strings"])
def test_summary_fixed_with_a_document_or_position_twice(categorical: bool) -> None:
    rows = [
        (config, "oracle", "q1", round_, "rerank", "frozen", measure, 0.5)
        for config in ("c1", "c2", "c3")
        for round_ in (0, 1, 2)
        for measure in ("P@1", "RR")
    ]
    keys = ["config_id", "policy", "query_id", "round", "stage", "eval_mode", "measure"]
    per_query = pd.DataFrame(rows, columns=[*keys, "value"])
    columns = ["config_id", "policy", "query_id", "round", "url", "rank"]
    feedback = pd.DataFrame(TWICE, columns=columns)
    if categorical:
        for key in keys:
            if key != "round":
                per_query[key] = per_query[key].astype("category")
        for key in ("config_id", "policy", "query_id", "url"):
            feedback[key] = feedback[key].astype("category")
    summary = rundir.summarize_scores(per_query, feedback, QRELS)
    fixed = summary[summary["fixed"]]
    got = set(
        zip(
            fixed["config_id"].astype(str),
            fixed["round"],
            fixed["measure"].astype(str),
            strict=True,
        )
    )
    assert got == TWICE_FIXED
    old = _fixed_cells(per_query, feedback, QRELS)
    assert {(str(k[0]), int(k[2]), str(k[5])) for k, f in old.items() if f} == TWICE_FIXED


def test_summary_fixed_on_cranfield_is_the_loops(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The first 15 Cranfield queries, four configs, two users, two rounds, as stored: every
    cell's ``fixed`` by codes is the one ``_fixed_cells``' per-episode loop gives."""
    tables = read_tables(shared_run(tmp_path_factory, "cranfield15", CRANFIELD15))
    per_query = tables.scores
    feedback = pd.DataFrame(list(feedback_frame(tables)), columns=FEEDBACK_COLUMNS)
    for key in ("config_id", "policy", "query_id", "url"):
        feedback[key] = feedback[key].astype("category")
    qrels: dict[str, dict[str, int]] = {}
    for query_id, url, grade in tables.trec_qrels.itertuples(index=False, name=None):
        qrels.setdefault(str(query_id), {})[str(url)] = int(grade)
    with pytest.MonkeyPatch.context() as patch:
        paths = _spy(patch)
        summary = rundir.summarize_scores(per_query, feedback, qrels)
    assert paths == ["codes"]
    old = _fixed_cells(per_query, feedback, qrels)
    want = [old.get(key, False) for key in summary[SUMMARY_KEYS].itertuples(index=False, name=None)]
    assert summary["fixed"].tolist() == want
    frozen = summary[summary["eval_mode"] == "frozen"]
    assert 0 < int(frozen["fixed"].sum()) < len(frozen)  # neither all nor none


# --- the codes path against the loop on random episodes ---------------------------------

URLS = [f"https://x.test/{name}" for name in "abcdefgh"]
MEASURES = ["P@1", "P@3", "RR", "nDCG@5", "AP", "R@2", "P(rel=2)@2", "RR(rel=2)"]


def _group_and_url(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return (*row[:3], row[4])


def _group_and_rank(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return (*row[:3], row[5])


@st.composite
def episodes(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, int]]]:
    """Random (config, policy, query) episodes over rounds 0..R, their feedback (rounds
    rising; a document or a position twice, gaps before a rank, ranks <= 0, and queries
    without feedback all allowed) and qrels with grades 0-3 (or none at all)."""
    configs = [f"c{i}" for i in range(draw(st.integers(1, 3)))]
    policies = ["oracle", "noisy"][: draw(st.integers(1, 2))]
    queries = [f"q{i}" for i in range(draw(st.integers(1, 3)))]
    rounds = draw(st.integers(1, 3))
    qrels = {
        query: draw(st.dictionaries(st.sampled_from(URLS), st.integers(0, 3), max_size=5))
        for query in queries
    }
    row = st.tuples(
        st.sampled_from(configs),
        st.sampled_from(policies),
        st.sampled_from(queries),
        st.integers(1, rounds),
        st.sampled_from(URLS),
        st.integers(-1, 6),
    )
    # mostly as an episode shows them (no document or position twice in a group: judged
    # by codes), then a few rows that may repeat one (their groups: by fixed_measures)
    rows = draw(
        st.lists(
            row,
            max_size=24,
            unique_by=(_group_and_url, _group_and_rank),
        )
    )
    rows += draw(st.lists(row, max_size=3))
    rows.sort(key=lambda row: row[3])  # rounds rise (stable: each round's rows keep order)
    measures = draw(st.lists(st.sampled_from(MEASURES), min_size=1, max_size=4, unique=True))
    per_query = pd.DataFrame(
        [
            (config, policy, query, round_, "rerank", mode, measure, 0.5)
            for config in configs
            for policy in policies
            for query in queries
            for round_ in range(rounds + 1)
            for mode in ("frozen", "residual")
            for measure in measures
        ],
        columns=list(PER_QUERY_COLUMNS),
    )
    for key in ("config_id", "policy", "query_id", "stage", "eval_mode", "measure"):
        per_query[key] = per_query[key].astype("category")
    feedback = pd.DataFrame(
        rows, columns=["config_id", "policy", "query_id", "round", "url", "rank"]
    )
    for key in ("config_id", "policy", "query_id", "url"):
        feedback[key] = feedback[key].astype("category")
    return per_query, feedback, qrels


@settings(deadline=None, max_examples=300)
@given(episodes())
def test_summary_fixed_by_codes_is_the_loops_on_random_episodes(
    case: tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, int]]],
) -> None:
    """Every cell's ``fixed`` by codes (every episode at once) is the one ``_fixed_cells``'
    loop gives (``fixed_measures`` per episode's pins), whatever the pins look like."""
    per_query, feedback, qrels = case
    with pytest.MonkeyPatch.context() as patch:
        paths = _spy(patch)
        summary = rundir.summarize_scores(per_query, feedback, qrels)
    assert paths == ["codes"]  # (rising rounds, categories: never the loop)
    old = _fixed_cells(per_query, feedback, qrels)
    want = [old.get(key, False) for key in summary[SUMMARY_KEYS].itertuples(index=False, name=None)]
    assert summary["fixed"].tolist() == want
