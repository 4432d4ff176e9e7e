"""The verdict of a multirun over collections, gathered into one report, is each job's own.

``ranker_compare``'s layout (the same configs on Cranfield and on CACM) replayed from the
shipped cassettes: the gathered report's tests, families and best settings must be those
each job's own report computes, since a query of one collection is never a query of the
other (it said "No feedback round to compare" over Holm cells of "n=0"). A sharded run's
report is the unsharded run's (tests/test_shards.py compares the pages).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from evidence_bench.report import analyze, gather_multirun, load_run, render_report
from evidence_bench.report.page import render_page
from evidence_bench.report.render import report_context
from evidence_bench.report.tables import query_deltas, verdict

ROOT = Path(__file__).resolve().parents[1]
#: What the gathered summary must repeat from each job's own, cell for cell.
COLUMNS = [
    "policy", "round", "stage", "measure", "n", "gain", "n_common", "gain_common",
    "p_rand_common", "p_holm", "significant", "judgment_p_holm",
]  # fmt: skip


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("gathered")
    where = root / "multirun"
    subprocess.run(
        [sys.executable, "-m", "evidence_bench", "run", "+experiment=ranker_compare",
         "experiment.queries=30", f"runs_dir={root}", "progress=false",
         f"hydra.sweep.dir={where}"],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    return where


def _verdict(analysis: object) -> object:
    best = analysis.best  # type: ignore[attr-defined]
    deltas = query_deltas(analysis.data, best.config_id, best.stage, best.round)  # type: ignore[attr-defined]
    return verdict(analysis, deltas)  # type: ignore[arg-type]


def test_each_jobs_cells_are_its_own_reports(sweep: Path) -> None:
    gathered = analyze(gather_multirun(sweep)).summary
    for job in ("0", "1"):
        own = analyze(load_run(sweep / job / "run")).summary
        mine = gathered[gathered["config_id"].str.startswith(f"j{job}:")].reset_index(drop=True)
        mine["config_id"] = mine["config_id"].str.removeprefix(f"j{job}:")
        pd.testing.assert_frame_equal(
            mine[["config_id", *COLUMNS]], own[["config_id", *COLUMNS]], check_dtype=False
        )
    tested = gathered[gathered["n"] > 0]
    assert (tested["n_common"] > 0).all()  # no family spans two collections


def test_the_verdict_is_each_collections_own(sweep: Path) -> None:
    merged = analyze(gather_multirun(sweep))
    found = _verdict(merged)
    sets = {name: (outcome, best) for name, outcome, best in found.by_query_set}  # type: ignore[attr-defined]
    assert list(sets) == ["cranfield", "cacm"]
    outcomes = []
    for job, name in (("0", "cranfield"), ("1", "cacm")):
        own = analyze(load_run(sweep / job / "run"))
        theirs = _verdict(own)
        outcome, best = sets[name]
        assert outcome == theirs.outcome  # type: ignore[attr-defined]
        assert best.config_id == f"j{job}:{own.best.config_id}"  # type: ignore[union-attr]
        assert best.stage == own.best.stage  # type: ignore[union-attr]
        assert best.candidates == own.best.candidates  # type: ignore[union-attr]
        for column in ("gain_common", "best_ci_low", "best_ci_high", "p_holm", "n_common"):
            assert best.rows[column].tolist() == own.best.rows[column].tolist()  # type: ignore[union-attr]
        outcomes.append(outcome)
    combined = (
        "yes" if set(outcomes) == {"yes"}
        else "partly" if {"yes", "partly"} & set(outcomes)
        else "no" if set(outcomes) <= {"no"} else "unclear"
    )  # fmt: skip
    assert found.outcome == combined  # type: ignore[attr-defined]
    assert found.outcome != "none"  # type: ignore[attr-defined]


def test_the_gathered_page_opens_with_a_verdict_and_names_the_collections(sweep: Path) -> None:
    html = render_report(sweep, trials=200).read_text("utf-8")
    assert "No feedback round to compare" not in html
    assert "n=0<" not in html and "n=0 " not in html
    assert 'data-query-set="cranfield"' in html and 'data-query-set="cacm"' in html
    assert html.index('id="verdict"') < html.index('id="header"')
    assert "cranfield · tfidf_rocchio" in html and "cacm · tfidf_rocchio" in html


def test_a_partly_headline_says_for_how_many_users_on_each_query_set(sweep: Path) -> None:
    context = report_context(analyze(gather_multirun(sweep), trials=200))
    row = context["verdict"]["by_query_set"][0]["rows"][0]

    def user(policy: str, gain: float, significant: bool) -> dict[str, object]:
        return {**row, "policy": policy, "gain_common": gain, "significant": significant}

    context["verdict"]["outcome"] = "partly"
    context["verdict"]["by_query_set"] = [
        {**context["verdict"]["by_query_set"][0], "query_set": "cranfield", "outcome": "yes",
         "rows": [user("oracle", 0.1, True), user("noisy", 0.05, True)]},
        {**context["verdict"]["by_query_set"][1], "query_set": "cacm", "outcome": "partly",
         "rows": [user("oracle", 0.1, True), user("noisy", 0.02, False),
                  user("random", -0.05, True)]},  # a significant loss is no user won
    ]  # fmt: skip
    page = render_page(context)
    headline = re.search(r'<p class="headline">(.*?)</p>', page, re.S)
    assert headline is not None
    assert " ".join(headline.group(1).split()) == (
        "Partly: feedback's own gain in nDCG@10 over the no-feedback control is significant"
        " for every user on cranfield, for 1 of 3 users on cacm."
    )
