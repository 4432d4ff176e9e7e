"""Label counts per policy and round, and the warning for a kind of label never given: on
hand-made rows, and on the shipped Cranfield collection, where the qrels list only relevant
documents and the oracle's negative feedback comes from the TREC assumption alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import RunOutcome, perform_run
from evidence_bench.report import gather_multirun, render_report, summary_table
from evidence_bench.users.labels import (
    COUNTED,
    describe_missing,
    label_counts,
    label_summary,
    label_warnings,
)
from evidence_bench.users.policies import (
    NegativeOnlyPolicy,
    OraclePolicy,
    PositiveOnlyPolicy,
    RandomPolicy,
)
from tests.conftest import exported

ZERO = dict.fromkeys(COUNTED, 0)


@pytest.mark.parametrize("as_frame", [False, True], ids=["rows", "frame"])
def test_counts_per_config_policy_and_round_in_the_order_met(as_frame: bool) -> None:
    rows = [
        ("c00", "oracle", 1, "more"),
        ("c00", "oracle", 1, "irrelevant"),
        ("c01", "oracle", 1, "relevant"),
        ("c00", "neg", 1, "seen"),
        ("c00", "oracle", 2, "seen"),
        ("c00", "oracle", 1, "irrelevant"),
        ("c00", "oracle", 2, "unsure"),
    ]
    columns = ["config_id", "policy", "round", "label"]
    given = pd.DataFrame(rows, columns=columns) if as_frame else rows
    assert label_counts(given) == [
        {"config_id": "c00", "policy": "oracle", "round": 1, **ZERO, "more": 1, "irrelevant": 2},
        {"config_id": "c00", "policy": "oracle", "round": 2, **ZERO, "seen": 1, "unsure": 1},
        {"config_id": "c00", "policy": "neg", "round": 1, **ZERO, "seen": 1},
        {"config_id": "c01", "policy": "oracle", "round": 1, **ZERO, "relevant": 1},
    ]


def test_a_frame_with_an_unknown_label_is_refused_naming_it() -> None:
    frame = pd.DataFrame(
        [("c00", "oracle", 1, "more"), ("c00", "oracle", 1, "maybe")],
        columns=["config_id", "policy", "round", "label"],
    )
    with pytest.raises(ValueError, match="unknown label 'maybe'"):
        label_counts(frame)


@pytest.mark.parametrize("as_frame", [False, True], ids=["rows", "frame"])
def test_a_missing_label_is_refused_not_counted_as_another(as_frame: bool) -> None:
    rows = [("c00", "oracle", 1, "relevant"), ("c00", "oracle", 1, None)]
    given = pd.DataFrame(rows, columns=["config_id", "policy", "round", "label"])
    with pytest.raises(ValueError, match="unknown label None"):
        label_counts(given if as_frame else rows)


def test_a_kind_a_policy_should_give_and_never_gave_is_missing() -> None:
    rows = [
        ("c00", "oracle", 1, "more"),
        *[("c00", "oracle", 1, "seen")] * 3,
        ("c01", "oracle", 2, "relevant"),
        *[("c00", "neg", 1, "seen")] * 2,
        ("c00", "pos", 1, "relevant"),
    ]
    users = [
        ("oracle", OraclePolicy(unjudged="skip")),
        ("neg", NegativeOnlyPolicy()),
        ("pos", PositiveOnlyPolicy()),
        ("rand", RandomPolicy()),  # no episode at all: it gave nothing
    ]
    summary = label_summary(rows, users)
    assert summary["expected"] == {
        "oracle": ["positive", "negative"],
        "neg": ["negative"],
        "pos": ["positive"],
        "rand": ["positive", "negative"],
    }
    hint = (
        "unjudged=skip gives unjudged results no negative label; unjudged=irrelevant counts "
        "them non-relevant (the TREC assumption)"
    )
    negative = ["less", "irrelevant"]
    assert summary["missing"] == [
        {"policy": "oracle", "kind": "negative", "labels": negative, "examined": 5, "hint": hint},
        {"policy": "neg", "kind": "negative", "labels": negative, "examined": 2, "hint": ""},
        {"policy": "rand", "kind": "positive", "labels": ["more", "relevant"], "examined": 0,
         "hint": ""},
        {"policy": "rand", "kind": "negative", "labels": negative, "examined": 0, "hint": ""},
    ]  # fmt: skip
    assert label_warnings(summary)[1] == (
        "warning: policy 'neg' should give negative labels (less, irrelevant) but gave none "
        "in 2 examined results"
    )
    assert describe_missing({**summary["missing"][0], "job": "j1:"}).startswith(
        "policy 'j1:oracle' should give negative labels (less, irrelevant) but gave none in 5 "
        "examined results: unjudged=skip gives"
    )
    assert label_warnings(None) == [] and label_warnings({"counts": []}) == []


# --- the shipped Cranfield collection --------------------------------------------------------


def cranfield_run(tmp_path: Path, *extra: str) -> RunOutcome:
    """The first 20 Cranfield queries, the default engine, one round, replayed cassettes."""
    cfg, text = compose(
        [
            "+experiment=ci",
            "experiment.queries=20",
            "experiment.rounds=1",
            f"runs_dir={tmp_path / 'runs'}",
            "workers=1",
            "progress=false",
            "report=false",
            *extra,
        ]
    )
    outcome = perform_run(cfg, text)
    exported(outcome.path, "csv")
    return outcome


def counts_of(manifest: dict[str, Any], policy: str) -> dict[str, int]:
    """A policy's round-1 counts, summed over configs."""
    rows = [c for c in manifest["labels"]["counts"] if c["policy"] == policy and c["round"] == 1]
    return {label: sum(int(r[label]) for r in rows) for label in COUNTED}


USERS = (
    "~policies.noisy",
    "+policy@policies.negative_only=negative_only",
    "+policy@policies.positive_only=positive_only",
    "+policy@policies.patient=patient",
    "+policy@policies.budget=budget",
)


@pytest.fixture(scope="module")
def cranfield(tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    return cranfield_run(tmp_path_factory.mktemp("labels"), *USERS)


def test_on_cranfield_the_oracle_marks_every_unlisted_result_irrelevant(
    cranfield: RunOutcome,
) -> None:
    qrels = pd.read_csv(cranfield.path / "qrels.csv", dtype=str)
    assert (qrels["relevance"].astype(int) >= 1).all()  # Cranfield lists relevant ones only
    listed = set(zip(qrels["query_id"], qrels["doc_id"], strict=True))
    feedback = pd.read_csv(cranfield.path / "feedback.csv", dtype=str)
    oracle = feedback[feedback["policy"] == "oracle"]
    unlisted = [
        (q, d) not in listed for q, d in zip(oracle["query_id"], oracle["doc_id"], strict=True)
    ]
    assert ((oracle["label"] == "irrelevant") == pd.Series(unlisted, index=oracle.index)).all()
    assert (oracle["label"] != "seen").all()
    counts = counts_of(dict(cranfield.manifest), "oracle")
    assert counts["irrelevant"] == sum(unlisted) > 100  # 20 queries x 10 examined
    assert counts["more"] + counts["relevant"] == len(oracle) - sum(unlisted) > 0


def test_on_cranfield_every_policy_gives_the_labels_it_should(cranfield: RunOutcome) -> None:
    manifest = dict(cranfield.manifest)
    feedback = pd.read_csv(cranfield.path / "feedback.csv", dtype=str)
    for policy in ("oracle", "negative_only", "positive_only", "patient", "budget"):
        mine = feedback[(feedback["policy"] == policy) & (feedback["round"] == "1")]
        recount = mine["label"].value_counts().to_dict()
        assert counts_of(manifest, policy) == {**ZERO, **recount}, policy
    negative_only = counts_of(manifest, "negative_only")
    assert negative_only["irrelevant"] > 100
    assert negative_only["more"] == negative_only["relevant"] == 0
    positive_only = counts_of(manifest, "positive_only")
    assert positive_only["irrelevant"] == positive_only["less"] == 0
    assert positive_only["more"] + positive_only["relevant"] > 0
    assert counts_of(manifest, "patient")["irrelevant"] > 0
    budget = counts_of(manifest, "budget")  # at most 3 marks per query, unjudged ones too
    assert budget["irrelevant"] > 0 and sum(budget.values()) - budget["seen"] <= 3 * 20
    assert manifest["labels"]["missing"] == []
    assert cranfield.terminal == ""  # no warning
    on_disk = json.loads((cranfield.path / "manifest.json").read_text())
    assert on_disk["labels"] == manifest["labels"]


def test_on_cranfield_gamma_now_changes_the_oracles_results(tmp_path: Path) -> None:
    """Two configs differing only in γ, the weight of negative feedback: with negatives some
    query's residual nDCG@10 differs; with unjudged results skipped (no negatives on
    Cranfield) every query's is the same, the defect this guards against."""

    def per_query(*extra: str) -> pd.Series:
        path = cranfield_run(tmp_path, "~policies.noisy", "+experiment.grid.gamma=[0,0.5]", *extra)
        pq = pd.read_csv(path.path / "per_query.csv", dtype={"query_id": str})
        pq = pq[(pq["stage"] == "rerank") & (pq["eval_mode"] == "residual")]
        pq = pq[pq["measure"] == "nDCG@10"]
        return pq.pivot(index="query_id", columns="config_id", values="value")

    with_negatives = per_query()
    assert len(with_negatives) >= 15
    assert (with_negatives["c00"] != with_negatives["c01"]).any()
    skipped = per_query("policies.oracle.unjudged=skip")
    assert (skipped["c00"] == skipped["c01"]).all()


def test_a_policy_without_negatives_is_warned_in_terminal_manifest_and_report(
    tmp_path: Path,
) -> None:
    outcome = cranfield_run(
        tmp_path,
        "~policies.noisy",
        "+policy@policies.negative_only=negative_only",
        "policies.oracle.unjudged=skip",
        "policies.negative_only.unjudged=skip",
    )
    missing = outcome.manifest["labels"]["missing"]
    assert [(m["policy"], m["kind"]) for m in missing] == [
        ("oracle", "negative"),
        ("negative_only", "negative"),
    ]
    assert counts_of(dict(outcome.manifest), "negative_only") == {**ZERO, "seen": 200}
    lines = outcome.terminal.splitlines()
    assert lines == [
        "warning: policy 'oracle' should give negative labels (less, irrelevant) but gave none "
        "in 200 examined results: unjudged=skip gives unjudged results no negative label; "
        "unjudged=irrelevant counts them non-relevant (the TREC assumption)",
        "warning: policy 'negative_only' should give negative labels (less, irrelevant) but "
        "gave none in 200 examined results: unjudged=skip gives unjudged results no negative "
        "label; unjudged=irrelevant counts them non-relevant (the TREC assumption)",
    ]
    # `report RUN_DIR`: rendered again from the run's files, with the table and the warning
    assert summary_table(outcome.path, trials=50).splitlines()[-2:] == lines
    html = render_report(outcome.path, trials=50).read_text()
    warnings = html[html.index('<section id="label-warnings"') : html.index('id="verdict"')]
    assert warnings.count("<li ") == 2
    assert 'data-policy="oracle" data-kind="negative"' in warnings
    table = html[html.index('<section id="labels">') : html.index('<section id="data">')]
    oracle = counts_of(dict(outcome.manifest), "oracle")
    row = table[table.index('<tr data-policy="oracle" data-round="1"') :]
    row = row[: row.index("</tr>")]
    for label in COUNTED:
        assert f'data-label="{label}">{oracle[label]}</td>' in row, label
    assert 'class="count missing" data-label="irrelevant">0</td>' in row


def test_a_multirun_keeps_each_jobs_counts_and_names_the_job_in_its_warning(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "multirun"
    for job, unjudged in (("0", "irrelevant"), ("1", "skip")):
        cfg, text = compose(
            ["+experiment=ci", "experiment.queries=20", "experiment.rounds=1", "~policies.noisy",
             f"policies.oracle.unjudged={unjudged}", "workers=1", "progress=false",
             "report=false"]
        )  # fmt: skip
        perform_run(cfg, text, run_dir=sweep / job / "run")
    data = gather_multirun(sweep)
    labels = data.manifest["labels"]
    assert [(c["config_id"], c["policy"], c["round"]) for c in labels["counts"]] == [
        ("j0:c00", "oracle", 1),
        ("j1:c00", "oracle", 1),
    ]
    irrelevant = [c["irrelevant"] for c in labels["counts"]]
    assert irrelevant[0] > 0 and irrelevant[1] == 0
    assert [(m["job"], m["policy"], m["kind"]) for m in labels["missing"]] == [
        ("j1:", "oracle", "negative")
    ]
    assert data.manifest["seeds"]["seed"] == 0  # the same seeds in both jobs: shown once
    html = render_report(sweep, trials=20).read_text()
    assert "policy &#39;j1:oracle&#39; should give negative labels" in html
    table = html[html.index('<section id="labels">') : html.index('<section id="data">')]
    # one row for round 1, its irrelevant cell the range across the two jobs' configs
    assert f'data-label="irrelevant">0–{irrelevant[0]}</td>' in table
    assert "<dt>Seeds · wall time</dt><dd>seed 0 · " in html
