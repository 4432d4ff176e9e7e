"""summarize_scores' ``fixed`` column: on frames small enough to work by hand (categorical
or plain string keys, feedback rows in or out of round order), on Cranfield and on random
episodes against the definition (:func:`~evidence_bench.evaluation.frozen.fixed_in_frozen`
of each frozen row's pins, one row at a time)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evidence_bench.evaluation.frozen import fixed_in_frozen
from evidence_bench.evaluation.measures import parse_measure
from evidence_bench.experiment import rundir
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


def _reference(
    per_query: pd.DataFrame, feedback: pd.DataFrame, qrels: dict[str, dict[str, int]]
) -> dict[tuple[Any, ...], bool]:
    """Each summary cell's ``fixed`` from the definition: a frozen cell is fixed when every
    one of its rows' measure is fixed in its episode's frozen rankings, whose pins are the
    episode's feedback of rounds up to its own, each document at its last rank (rows taken
    by round, in their order within one)."""
    rows = sorted(feedback.astype({"round": int}).itertuples(index=False), key=lambda r: r.round)
    cells: dict[tuple[Any, ...], bool] = {}
    for row in per_query.itertuples(index=False):
        key = tuple(getattr(row, c) for c in SUMMARY_KEYS)
        if row.eval_mode != "frozen":
            cells[key] = False
            continue
        pins = {
            str(f.url): int(f.rank)
            for f in rows
            if (str(f.config_id), str(f.policy), str(f.query_id))
            == (str(row.config_id), str(row.policy), str(row.query_id))
            and f.round <= row.round
        }
        measure = parse_measure(str(row.measure))
        fixed = fixed_in_frozen(measure, pins, qrels.get(str(row.query_id), {}))
        cells[key] = cells.get(key, True) and fixed
    return cells


def _fixed_as_reference(
    per_query: pd.DataFrame, feedback: pd.DataFrame, qrels: dict[str, dict[str, int]]
) -> None:
    summary = rundir.summarize_scores(per_query, feedback, qrels)
    want = _reference(per_query, feedback, qrels)
    keys = summary[SUMMARY_KEYS].itertuples(index=False, name=None)
    assert summary["fixed"].tolist() == [want[key] for key in keys]


@pytest.mark.parametrize("categorical", [True, False], ids=["categorical", "strings"])
@pytest.mark.parametrize("shuffled", [False, True], ids=["rising", "shuffled"])
def test_summary_fixed_by_hand(categorical: bool, shuffled: bool) -> None:
    """summarize_scores' ``fixed`` is the cells worked out above, whatever the keys' dtype
    and the feedback's row order."""
    per_query, feedback = _frames(categorical, shuffled)
    summary = rundir.summarize_scores(per_query, feedback, QRELS)
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
    _fixed_as_reference(per_query, feedback, QRELS)


def test_summary_fixed_on_cranfield_is_the_definitions(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """The first 15 Cranfield queries, four configs, two users, two rounds, as stored: every
    cell's ``fixed`` is the definition's."""
    tables = read_tables(shared_run(tmp_path_factory, "cranfield15", CRANFIELD15))
    per_query = tables.scores
    feedback = pd.DataFrame(list(feedback_frame(tables)), columns=FEEDBACK_COLUMNS)
    for key in ("config_id", "policy", "query_id", "url"):
        feedback[key] = feedback[key].astype("category")
    qrels: dict[str, dict[str, int]] = {}
    for query_id, url, grade in tables.trec_qrels.itertuples(index=False, name=None):
        qrels.setdefault(str(query_id), {})[str(url)] = int(grade)
    summary = rundir.summarize_scores(per_query, feedback, qrels)
    _fixed_as_reference(per_query, feedback, qrels)
    frozen = summary[summary["eval_mode"] == "frozen"]
    assert 0 < int(frozen["fixed"].sum()) < len(frozen)  # neither all nor none


# --- against the definition on random episodes ------------------------------------------

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
    if draw(st.booleans()):  # rounds rise (stable: each round's rows keep order), or not
        rows.sort(key=lambda row: row[3])
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
def test_summary_fixed_is_the_definitions_on_random_episodes(
    case: tuple[pd.DataFrame, pd.DataFrame, dict[str, dict[str, int]]],
) -> None:
    """Every cell's ``fixed`` (every episode at once, by codes) is the definition's,
    whatever the pins look like."""
    _fixed_as_reference(*case)
