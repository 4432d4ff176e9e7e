"""Click-model users: click probabilities worked by hand, skip-above labels, grade levels,
seeding across processes, config errors, and runs on the shipped Cranfield and CACM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd
import pytest

import evidence_bench.users.clicks as clicks_module
from evidence_bench.engine.base import Label
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.components import USERS, make_user
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.run import perform_run
from evidence_bench.experiment.runner import plan_users
from evidence_bench.report.fresh import new_run_report
from evidence_bench.users.clicks import (
    PRESETS,
    CascadeUser,
    DbnUser,
    PositionBasedUser,
    relevance_level,
)
from evidence_bench.users.policies import LabelKind, Mark, UserPolicy
from tests.conftest import exported

MORE, LESS = Label.MORE, Label.LESS
NAV_CLICK, NAV_STOP = PRESETS["navigational"]


def doc(name: str) -> Evidence:
    return Evidence(title=name, url=f"https://example.org/{name}", snippet="")


def show(*names: str) -> list[Evidence]:
    return [doc(n) for n in names]


def judge(
    user: UserPolicy,
    displayed: Sequence[Evidence],
    judgments: Mapping[str, int],
    examined: frozenset[str] = frozenset(),
    *,
    query_id: str = "q1",
    round: int = 1,
) -> list[Mark]:
    return user.judge(
        query_id=query_id,
        round=round,
        displayed=displayed,
        judgments=judgments,
        examined=examined,
    )


def labels(marks: list[Mark]) -> list[tuple[str, Label | None]]:
    return [(m.key.rsplit("/", 1)[1], m.label) for m in marks]


# --- relevance levels ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("grade", "top", "expected"),
    [
        (None, 4, 0.05),  # unjudged: level 0
        (0, 4, 0.05),
        (-1, 4, 0.05),
        (1, 4, 0.3),  # Cranfield: the grade is the level
        (3, 4, 0.7),
        (4, 4, 0.95),
        (7, 4, 0.95),  # above the scale: the last level
        (1, 1, 0.95),  # CACM, binary: Hofmann et al.'s P(click | R = 1) = 0.95
        (1, 2, 0.5),  # a 0..2 scale: Oosterhuis & de Rijke's three-level 0.05 / 0.5 / 0.95
        (2, None, 0.5),  # no scale: the grade is the level
        (1, 3, 0.3 * (2 / 3) + 0.5 * (1 / 3)),  # position 4/3: between levels 1 and 2
    ],
)
def test_grades_map_to_levels_on_the_collections_scale(
    grade: int | None, top: int | None, expected: float
) -> None:
    assert relevance_level(grade, NAV_CLICK, top) == pytest.approx(expected)


def test_binary_ends_of_the_presets_are_hofmanns_binary_values() -> None:
    # Hofmann, Whiteson & de Rijke 2011/2013: P(click | R = 0, 1) and P(stop | R = 0, 1).
    binary = {
        "perfect": ((0.0, 1.0), (0.0, 0.0)),
        "navigational": ((0.05, 0.95), (0.2, 0.9)),
        "informational": ((0.4, 0.9), (0.1, 0.5)),
    }
    for name, (click, stop) in PRESETS.items():
        got = tuple(relevance_level(g, click, 1) for g in (0, 1))
        assert (got, tuple(relevance_level(g, stop, 1) for g in (0, 1))) == binary[name]


# --- click probabilities worked by hand ------------------------------------------------------

# a (grade 4), b (unjudged), c (grade 2) on Cranfield's 0..4 scale, navigational user:
# α = 0.95, 0.05, 0.5; σ = 0.9, 0.2, 0.5.
DISPLAY = show("a", "b", "c")
GRADES = {DISPLAY[0].key: 4, DISPLAY[2].key: 2}
# PBM, η = 1: P(click at r) = (1/r)·α: 0.95, 0.05/2, 0.5/3.
PBM_CLICKS = (0.95, 0.025, 0.5 / 3)
# PBM skip-above: b is LESS when b is not clicked and c is: (1 − 0.025)·(1/6);
# a is LESS when a is not clicked and b or c is: 0.05·(1 − 0.975·(5/6)).
PBM_LESS = (0.05 * (1 - 0.975 * 5 / 6), 0.975 / 6, 0.0)
# Cascade: 0.95; 0.05·0.05; 0.05·0.95·0.5.
CASCADE_CLICKS = (0.95, 0.0025, 0.02375)
# DBN, γ = 1: P(E_b) = 1 − 0.95·0.9 = 0.145; P(E_c) = 0.145·(1 − 0.05·0.2) = 0.14355.
DBN_CLICKS = (0.95, 0.145 * 0.05, 0.14355 * 0.5)
# DBN, γ = 0.5: P(E_b) = 0.5·0.145 = 0.0725; P(E_c) = 0.0725·0.5·0.99 = 0.0358875.
DBN_HALF_CLICKS = (0.95, 0.0725 * 0.05, 0.0358875 * 0.5)
TRIALS = 8000
# Binomial standard error at p = 0.5 over 8000 trials is 0.0056: 4 of them.
TOLERANCE = 0.022


def rates(user: UserPolicy, label: Label) -> tuple[float, ...]:
    counts = [0, 0, 0]
    for query in range(TRIALS):
        for mark in judge(user, DISPLAY, GRADES, query_id=f"q{query}"):
            if mark.label is label:
                counts[[d.key for d in DISPLAY].index(mark.key)] += 1
    return tuple(c / TRIALS for c in counts)


@pytest.mark.parametrize(
    ("user", "clicks"),
    [
        (PositionBasedUser(top_grade=4), PBM_CLICKS),
        (CascadeUser(top_grade=4), CASCADE_CLICKS),
        (DbnUser(top_grade=4), DBN_CLICKS),
        (DbnUser(top_grade=4, p_continue=0.5), DBN_HALF_CLICKS),
    ],
    ids=["pbm", "cascade", "dbn", "dbn-gamma-0.5"],
)
def test_click_rates_over_many_queries_match_the_hand_worked_marginals(
    user: UserPolicy, clicks: tuple[float, ...]
) -> None:
    assert rates(user, MORE) == pytest.approx(clicks, abs=TOLERANCE)


def test_pbm_skip_above_rates_match_the_hand_worked_marginals() -> None:
    assert rates(PositionBasedUser(top_grade=4), LESS) == pytest.approx(PBM_LESS, abs=TOLERANCE)


def test_pbm_examination_is_one_over_rank_to_the_eta() -> None:
    assert [PositionBasedUser().examination(r) for r in (1, 2, 4)] == [1.0, 0.5, 0.25]
    assert PositionBasedUser(eta=2.0).examination(3) == pytest.approx(1 / 9)
    assert PositionBasedUser(eta=0.0).examination(10) == 1.0


# --- labels from clicks, exactly (probabilities 0 and 1) ------------------------------------

ZERO_ONE = (0.0, 1.0)  # never click level 0, always click level 1


def test_cascade_stops_at_the_first_click_and_marks_the_skips_above_less() -> None:
    displayed = show("n1", "n2", "r", "n3")
    grades = {displayed[2].key: 1}
    user = CascadeUser(p_click=ZERO_ONE)
    assert labels(judge(user, displayed, grades)) == [("n1", LESS), ("n2", LESS), ("r", MORE)]
    quiet = CascadeUser(p_click=ZERO_ONE, skip_above="none")
    assert labels(judge(quiet, displayed, grades)) == [("n1", None), ("n2", None), ("r", MORE)]


def test_cascade_without_a_click_examines_to_depth_and_gives_no_label() -> None:
    displayed = show("n1", "n2", "n3", "n4")
    user = CascadeUser(depth=3, p_click=ZERO_ONE)
    assert labels(judge(user, displayed, {})) == [("n1", None), ("n2", None), ("n3", None)]


def test_dbn_without_satisfaction_goes_on_after_clicks_and_labels_skips_above_the_last() -> None:
    displayed = show("n1", "r1", "n2", "r2", "n3")
    grades = {displayed[1].key: 1, displayed[3].key: 1}
    user = DbnUser(p_click=ZERO_ONE, p_stop=(0.0, 0.0))
    assert labels(judge(user, displayed, grades)) == [
        ("n1", LESS),
        ("r1", MORE),
        ("n2", LESS),
        ("r2", MORE),
        ("n3", None),
    ]


def test_dbn_satisfied_by_a_click_stops_there() -> None:
    displayed = show("n1", "r1", "n2", "r2")
    grades = {displayed[1].key: 1, displayed[3].key: 1}
    user = DbnUser(p_click=ZERO_ONE, p_stop=(0.0, 1.0))
    assert labels(judge(user, displayed, grades)) == [("n1", LESS), ("r1", MORE)]


def test_dbn_that_never_continues_examines_only_the_first_result() -> None:
    user = DbnUser(p_click=ZERO_ONE, p_continue=0.0)
    assert labels(judge(user, show("n1", "r1"), {doc("r1").key: 1})) == [("n1", None)]


def test_pbm_examining_every_rank_labels_like_the_clicks_say() -> None:
    displayed = show("n1", "r1", "n2", "r2", "n3")
    grades = {displayed[1].key: 1, displayed[3].key: 1}
    user = PositionBasedUser(p_click=ZERO_ONE, eta=0.0)
    assert labels(judge(user, displayed, grades)) == [
        ("n1", LESS),
        ("r1", MORE),
        ("n2", LESS),
        ("r2", MORE),
        ("n3", None),
    ]


def test_pbm_labels_an_unexamined_result_above_a_click_less_and_never_marks_one_below() -> None:
    # n1 is always examined and never clicked; r1 and r2 are clicked when examined (1/2 and
    # 1/3). r1 not clicked while r2 is means r1 went unexamined: a click log still reads it
    # as skipped above a click (Joachims et al. 2005), so it is LESS, not "seen".
    displayed = show("n1", "r1", "r2")
    grades = {displayed[1].key: 1, displayed[2].key: 1}
    user = PositionBasedUser(p_click=ZERO_ONE)
    unexamined_above = 0
    for query in range(300):
        marks = dict(labels(judge(user, displayed, grades, query_id=f"q{query}")))
        assert marks["n1"] is (LESS if MORE in marks.values() else None)
        if marks.get("r2") is MORE and marks.get("r1") is not MORE:
            assert marks["r1"] is LESS
            unexamined_above += 1
        if "r2" not in marks:  # not examined, nothing below it: no mark
            assert set(marks) <= {"n1", "r1"}
    assert 25 <= unexamined_above <= 75  # expected 300 · (1/2) · (1/3) = 50


def test_results_examined_in_an_earlier_round_are_skipped_and_ranks_restart() -> None:
    displayed = show("old1", "old2", "r", "n")
    grades = {displayed[2].key: 1}
    examined = frozenset({displayed[0].key, displayed[1].key})
    user = CascadeUser(p_click=ZERO_ONE)
    assert labels(judge(user, displayed, grades, examined)) == [("r", MORE)]
    # PBM: r is the round's first new result, rank 1, so examined with probability 1
    pbm = PositionBasedUser(p_click=ZERO_ONE, eta=30.0)
    for query in range(20):
        got = labels(judge(pbm, displayed, grades, examined, query_id=f"q{query}"))
        assert got[0] == ("r", MORE)


def test_cascade_is_the_dbn_always_satisfied_by_a_click_draw_for_draw() -> None:
    displayed = show(*(f"d{i}" for i in range(10)))
    grades = {d.key: i % 5 for i, d in enumerate(displayed)}
    for query in range(200):
        cascade = judge(CascadeUser(top_grade=4), displayed, grades, query_id=f"q{query}")
        dbn = judge(
            DbnUser(top_grade=4, p_stop=(1.0,) * 5), displayed, grades, query_id=f"q{query}"
        )
        assert cascade == dbn


def test_a_results_click_decision_does_not_depend_on_what_else_is_shown() -> None:
    # common random numbers: the cascade's decision on the first result is its own draw
    # (its label may differ: LESS when a result below it is clicked)
    grades = {doc("x").key: 2}
    clicked = 0
    for query in range(50):
        first = judge(CascadeUser(top_grade=4), show("x", "y"), grades, query_id=f"q{query}")
        other = judge(CascadeUser(top_grade=4), show("x", "z"), grades, query_id=f"q{query}")
        assert (first[0].label is MORE) == (other[0].label is MORE)
        clicked += first[0].label is MORE
    assert 0 < clicked < 50


@pytest.mark.parametrize(
    ("user", "kinds"),
    [
        (PositionBasedUser(), {LabelKind.POSITIVE, LabelKind.NEGATIVE}),
        (CascadeUser(skip_above="none"), {LabelKind.POSITIVE}),
        (DbnUser(p_click=(0.0, 0.0)), set()),
        (CascadeUser(p_click=(1.0, 1.0)), {LabelKind.POSITIVE}),
        # one result scanned a round: no unclicked result above a click, so no LESS
        (PositionBasedUser(depth=1), {LabelKind.POSITIVE}),
        (CascadeUser(depth=1), {LabelKind.POSITIVE}),
        (DbnUser(depth=1), {LabelKind.POSITIVE}),
        (DbnUser(depth=2), {LabelKind.POSITIVE, LabelKind.NEGATIVE}),
    ],
)
def test_each_click_model_declares_the_labels_it_can_give(
    user: UserPolicy, kinds: set[LabelKind]
) -> None:
    assert user.expects == kinds


# --- seeding ---------------------------------------------------------------------------------

_CHILD = """
import json
from evidence_bench.evidence import Evidence
from evidence_bench.users.clicks import CascadeUser, DbnUser, PositionBasedUser
shown = [Evidence(title=f"d{i}", url=f"https://example.org/d{i}", snippet="") for i in range(10)]
grades = {d.key: i % 5 for i, d in enumerate(shown)}
out = []
for user in (PositionBasedUser(seed=3), CascadeUser(seed=3), DbnUser(seed=3)):
    for q in range(5):
        marks = user.judge(query_id=f"q{q}", round=2, displayed=shown, judgments=grades,
                           examined=frozenset())
        out.append([[m.key, m.label] for m in marks])
print(json.dumps(out))
"""


def test_clicks_are_the_same_in_every_process_and_change_with_the_seed() -> None:
    root = Path(clicks_module.__file__).resolve().parents[2]
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
        done = subprocess.run(
            [sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, check=True
        )
        outputs.append(json.loads(done.stdout))
    shown = show(*(f"d{i}" for i in range(10)))
    grades = {d.key: i % 5 for i, d in enumerate(shown)}

    def here(seed: int) -> list[list[list[object]]]:
        out = []
        for user in (PositionBasedUser(seed=seed), CascadeUser(seed=seed), DbnUser(seed=seed)):
            for q in range(5):
                marks = judge(user, shown, grades, query_id=f"q{q}", round=2)
                out.append([[m.key, m.label] for m in marks])
        return out

    assert outputs[0] == outputs[1] == here(3)
    assert here(4) != here(3)


# --- config ----------------------------------------------------------------------------------


def test_every_click_kind_is_registered_with_its_presets() -> None:
    assert {"pbm", "cascade", "dbn"} <= set(USERS)
    conf = Path(__file__).resolve().parents[1] / "conf" / "policy"
    names = [f"{kind}_{preset}" for kind in ("pbm", "cascade", "dbn") for preset in PRESETS]
    # every preset as its own user of one composition (Hydra composes in ~0.25 s)
    cfg, _ = compose(["+experiment=smoke", *(f"+policy@policies.{n}={n}" for n in names)])
    for kind in ("pbm", "cascade", "dbn"):
        for preset, (click, stop) in PRESETS.items():
            user = make_user("u", cfg["policies"][f"{kind}_{preset}"])
            assert type(user) is USERS[kind]
            assert user.p_click == click  # type: ignore[attr-defined]
            if kind == "dbn":
                assert user.p_stop == stop  # type: ignore[attr-defined]
            assert (conf / f"{kind}_{preset}.yaml").read_text().startswith("# ")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["policies.u.p_stop=[0.1,0.2]"], "policies.u.p_stop=[0.1, 0.2]: kind 'pbm' does not "),
        (["policies.u.p_click=[1.5,0.2]"], "policies.u: pbm: p_click must be a probability in"),
        (["policies.u.p_click=[0.5]"], "p_click must be a list of at least 2 probabilities"),
        (["policies.u.skip_above=maybe"], "skip_above must be one of less, none; got 'maybe'"),
        (["policies.u.eta=-1"], "policies.u: pbm: eta must be a number >= 0, got -1.0"),
        (["policies.u.top_grade=0"], "top_grade must be an integer >= 1"),
        (["policies.u.p_relevant=0.6"], "policies.u.p_relevant=0.6: kind 'pbm' does not take"),
        (["policies.oracle.eta=2"], "policies.oracle.eta=2.0: kind 'oracle' does not take 'eta'"),
    ],
)
def test_bad_click_config_is_one_line_naming_the_key(extra: list[str], message: str) -> None:
    cfg, _ = compose(["+experiment=smoke", "+policy@policies.u=pbm_navigational", *extra])
    with pytest.raises(ConfigurationError) as caught:
        plan_run(cfg)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_the_run_reads_grades_on_the_collections_scale() -> None:
    for query_set, top in (("cranfield", 4), ("cacm", 1)):
        cfg, _ = compose(
            ["+experiment=smoke", f"query_set={query_set}", "+policy@policies.u=dbn_perfect"]
        )
        users = dict(plan_users(plan_run(cfg)))
        assert users["u"].top_grade == top  # type: ignore[attr-defined]
    cfg, _ = compose(
        ["+experiment=smoke", "+policy@policies.u=dbn_perfect", "policies.u.top_grade=2"]
    )
    assert dict(plan_users(plan_run(cfg)))["u"].top_grade == 2  # type: ignore[attr-defined]


def test_added_qrels_set_the_scale_when_their_grade_is_higher(tmp_path: Path) -> None:
    # CACM's own judgments are binary (G = 1); an assessor's grade 3 (assess's "highly
    # relevant") puts the scale at 0..3, or a 3 would read as the table's last level and a 1
    # (assess's "related") as well.
    added = tmp_path / "mine.tsv"
    added.write_text("query-id\tcorpus-id\tscore\n1\t1410\t3\n1\t1572\t2\n")
    overrides = ["+experiment=smoke", "query_set=cacm", "+policy@policies.u=dbn_perfect"]
    cfg, _ = compose([*overrides, f"query_set.qrels={added}"])
    assert dict(plan_users(plan_run(cfg)))["u"].top_grade == 3  # type: ignore[attr-defined]


# --- on the shipped collections --------------------------------------------------------------


def test_click_users_on_cranfield_label_from_clicks_and_the_report_compares_them(
    tmp_path: Path,
) -> None:
    cfg, text = compose(
        [
            "+experiment=smoke",
            "experiment.queries=15",
            "+policy@policies.pbm=pbm_perfect",
            "+policy@policies.cascade=cascade_perfect",
            "+policy@policies.dbn=dbn_navigational",
            f"runs_dir={tmp_path / 'runs'}",
            "workers=1",
            "progress=false",
        ]
    )
    outcome = perform_run(cfg, text, report=new_run_report)
    feedback = pd.read_csv(exported(outcome.path, "csv") / "feedback.csv", dtype={"query_id": str})
    qrels = pd.read_csv(outcome.path / "qrels.csv", dtype={"query_id": str, "doc_id": str})
    assert set(feedback[feedback["policy"] != "oracle"]["label"]) <= {"more", "less", "seen"}
    grade = {(q, d): g for q, d, g in qrels[["query_id", "doc_id", "relevance"]].values}
    perfect = feedback[feedback["policy"].isin(["pbm", "cascade"])]
    clicked = perfect[perfect["label"] == "more"]
    # perfect users never click a result of level 0 (unjudged on Cranfield)
    assert len(clicked) > 0
    assert all(grade.get((q, str(d)), 0) > 0 for q, d in clicked[["query_id", "doc_id"]].values)
    # the cascade clicks at most once per query and round
    cascade = feedback[(feedback["policy"] == "cascade") & (feedback["label"] == "more")]
    assert cascade.groupby(["query_id", "round"]).size().max() == 1
    assert outcome.manifest["labels"]["missing"] == []
    html = (outcome.path / "report.html").read_text()
    assert 'id="oracle-share"' in html
    for name in ("pbm", "cascade", "dbn"):
        assert f'data-user="{name}" data-share-round="1" data-share-stage="rerank"' in html
