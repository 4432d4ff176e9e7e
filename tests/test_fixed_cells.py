"""``_fixed_cells`` on a frame small enough to work by hand, through each of its paths: the
fast one by codes (categorical keys, feedback rounds rising) and the per-episode loop (plain
string keys; feedback rows not in round order), which must give the same set."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from evidence_bench.experiment import rundir
from evidence_bench.experiment.rundir import _fixed_cells

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
