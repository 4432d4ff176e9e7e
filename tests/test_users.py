"""Simulated users: labels from the qrels, examination order, stopping, budget, randomness."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import evidence_bench.users.policies as users_module
from evidence_bench.engine.base import Label
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.components import make_user
from evidence_bench.users.policies import (
    POLICIES,
    LabelKind,
    Mark,
    NegativeOnlyPolicy,
    NoisyPolicy,
    OraclePolicy,
    PatientPolicy,
    PositiveOnlyPolicy,
    RandomPolicy,
    UserPolicy,
)

R, M, IRR, UNS = Label.RELEVANT, Label.MORE, Label.IRRELEVANT, Label.UNSURE
POS, NEG = LabelKind.POSITIVE, LabelKind.NEGATIVE


def doc(name: str) -> Evidence:
    return Evidence(title=name, url=f"https://example.org/{name}", snippet="")


def key(name: str) -> str:
    return f"https://example.org/{name}"


def show(*names: str) -> list[Evidence]:
    return [doc(n) for n in names]


def judge(
    policy: UserPolicy,
    displayed: Sequence[Evidence],
    judgments: Mapping[str, int],
    examined: frozenset[str] = frozenset(),
    *,
    query_id: str = "q1",
    round: int = 1,
) -> list[Mark]:
    return policy.judge(
        query_id=query_id,
        round=round,
        displayed=displayed,
        judgments=judgments,
        examined=examined,
    )


def labels(marks: list[Mark]) -> list[tuple[str, Label | None]]:
    """Marks as (document name, label), for readable expectations."""
    return [(m.key.removeprefix("https://example.org/"), m.label) for m in marks]


# a: grade 2, b: grade 1, c: grade 0, d: unjudged, e: grade 3
JUDGMENTS = {key("a"): 2, key("b"): 1, key("c"): 0, key("e"): 3}
DISPLAYED = show("a", "b", "c", "d", "e")


def test_oracle_maps_grades_to_labels_and_unjudged_to_irrelevant() -> None:
    """The TREC assumption by default: d, unjudged, is non-relevant."""
    marks = judge(OraclePolicy(), DISPLAYED, JUDGMENTS)
    assert labels(marks) == [("a", M), ("b", R), ("c", IRR), ("d", IRR), ("e", M)]


@pytest.mark.parametrize(("unjudged", "d"), [("irrelevant", IRR), ("unsure", UNS), ("skip", None)])
def test_oracle_unjudged_choices(
    unjudged: Literal["irrelevant", "unsure", "skip"], d: Label | None
) -> None:
    marks = judge(OraclePolicy(unjudged=unjudged), DISPLAYED, JUDGMENTS)
    # only d is unjudged; the judged results keep their labels whatever the choice
    assert labels(marks) == [("a", M), ("b", R), ("c", IRR), ("d", d), ("e", M)]


def test_oracle_on_qrels_that_list_only_relevant_documents() -> None:
    """Cranfield-like qrels (every listed grade >= 1): negatives come from unjudged results
    only, so ``skip`` gives none and the default gives one per unlisted result."""
    only_relevant = {key("a"): 2, key("b"): 1}
    displayed = show("x", "a", "y", "b", "z")
    default = judge(OraclePolicy(), displayed, only_relevant)
    assert labels(default) == [("x", IRR), ("a", M), ("y", IRR), ("b", R), ("z", IRR)]
    skipped = judge(OraclePolicy(unjudged="skip"), displayed, only_relevant)
    assert labels(skipped) == [("x", None), ("a", M), ("y", None), ("b", R), ("z", None)]


def test_oracle_unjudged_unsure_and_strong_grade() -> None:
    marks = judge(OraclePolicy(strong_grade=3, unjudged="unsure"), DISPLAYED, JUDGMENTS)
    assert labels(marks) == [("a", R), ("b", R), ("c", IRR), ("d", UNS), ("e", M)]


def test_negative_grades_are_non_relevant() -> None:
    marks = judge(OraclePolicy(), show("spam"), {key("spam"): -2})
    assert labels(marks) == [("spam", IRR)]


def test_positive_only_marks_only_relevant() -> None:
    marks = judge(PositiveOnlyPolicy(), DISPLAYED, JUDGMENTS)
    assert labels(marks) == [("a", M), ("b", R), ("c", None), ("d", None), ("e", M)]


def test_negative_only_marks_only_irrelevant() -> None:
    marks = judge(NegativeOnlyPolicy(), DISPLAYED, JUDGMENTS)
    assert labels(marks) == [("a", None), ("b", None), ("c", IRR), ("d", IRR), ("e", None)]
    marks = judge(NegativeOnlyPolicy(unjudged="skip"), DISPLAYED, JUDGMENTS)
    assert labels(marks) == [("a", None), ("b", None), ("c", IRR), ("d", None), ("e", None)]


def test_matching_url_variants_are_judged_by_canonical_key() -> None:
    variant = Evidence(title="a", url="HTTPS://Example.org/a/?utm_source=x#top", snippet="")
    marks = judge(OraclePolicy(), [variant], JUDGMENTS)
    assert marks == [Mark(key("a"), M)]


def test_examination_skips_examined_and_stops_at_depth() -> None:
    displayed = show("a", "b", "c", "d", "e")
    examined = frozenset({key("a"), key("c")})
    marks = judge(OraclePolicy(depth=2), displayed, JUDGMENTS, examined)
    # a and c are scanned past; depth counts only new results: b, d
    assert labels(marks) == [("b", R), ("d", IRR)]


def test_depth_larger_than_list_examines_everything_new() -> None:
    marks = judge(OraclePolicy(depth=50), DISPLAYED, JUDGMENTS, frozenset({key("e")}))
    assert [m.key for m in marks] == [key(n) for n in "abcd"]


def test_duplicate_in_display_is_examined_once() -> None:
    displayed = [*show("a", "b"), doc("a"), doc("c")]
    marks = judge(OraclePolicy(depth=3), displayed, JUDGMENTS)
    assert [m.key for m in marks] == [key("a"), key("b"), key("c")]


@pytest.mark.parametrize(("unjudged", "n4"), [("irrelevant", IRR), ("unsure", UNS), ("skip", None)])
def test_patient_labels_unjudged_as_told_and_stops_the_same(
    unjudged: Literal["irrelevant", "unsure", "skip"], n4: Label | None
) -> None:
    """n4 is unjudged: it counts towards the run of non-relevant results whatever its label,
    so the scan stops after n3, n4, n5 in every case."""
    names = ["r1", "n1", "n2", "r2", "n3", "n4", "n5", "n6", "r3"]
    judgments = {key(n): (1 if n.startswith("r") else 0) for n in names}
    judgments.pop(key("n4"))
    marks = judge(PatientPolicy(patience=3, unjudged=unjudged), show(*names), judgments)
    assert labels(marks) == [
        ("r1", R), ("n1", IRR), ("n2", IRR), ("r2", R), ("n3", IRR), ("n4", n4), ("n5", IRR)
    ]  # fmt: skip


@pytest.mark.parametrize("patience", [1, 2, 3])
def test_patience_stops_exactly_after_n_consecutive_non_relevant(patience: int) -> None:
    # relevant, 2 non-relevant (run broken by a relevant), then a long non-relevant tail
    names = ["r1", "n1", "n2", "r2", "n3", "n4", "n5", "n6", "r3"]
    judgments = {key(n): (1 if n.startswith("r") else 0) for n in names}
    judgments.pop(key("n4"))  # unjudged counts as non-relevant
    marks = judge(PatientPolicy(patience=patience), show(*names), judgments)
    examined = [m.key.removeprefix("https://example.org/") for m in marks]
    expected = {
        1: ["r1", "n1"],
        2: ["r1", "n1", "n2"],
        3: ["r1", "n1", "n2", "r2", "n3", "n4", "n5"],
    }
    assert examined == expected[patience]


def test_patient_never_gives_up_on_relevant_results_and_respects_depth() -> None:
    names = [f"r{i}" for i in range(30)]
    judgments = {key(n): 1 for n in names}
    marks = judge(PatientPolicy(patience=1), show(*names), judgments)
    assert len(marks) == 20
    assert all(m.label is R for m in marks)


def test_budget_limits_marks_but_not_examination() -> None:
    marks = judge(OraclePolicy(budget=2), DISPLAYED, JUDGMENTS)
    # after a, b the budget is spent: the rest are seen
    assert labels(marks) == [("a", M), ("b", R), ("c", None), ("d", None), ("e", None)]
    marks = judge(OraclePolicy(budget=0), DISPLAYED, JUDGMENTS)
    assert len(marks) == 5
    assert all(m.label is None for m in marks)


def test_unjudged_results_spend_budget_unless_skipped() -> None:
    displayed = show("c", "d", "b", "a")
    marks = judge(OraclePolicy(budget=2), displayed, JUDGMENTS)
    # c (grade 0) and d (unjudged, non-relevant) spend the budget before b and a
    assert labels(marks) == [("c", IRR), ("d", IRR), ("b", None), ("a", None)]
    marks = judge(OraclePolicy(budget=2, unjudged="skip"), displayed, JUDGMENTS)
    # d is only seen and spends nothing, so b still gets its mark
    assert labels(marks) == [("c", IRR), ("d", None), ("b", R), ("a", None)]


def test_budget_counts_only_given_labels() -> None:
    marks = judge(PositiveOnlyPolicy(budget=1), show("c", "d", "b", "a"), JUDGMENTS)
    assert labels(marks) == [("c", None), ("d", None), ("b", R), ("a", None)]


def noisy_corpus(n: int) -> tuple[list[Evidence], dict[str, int]]:
    displayed = show(*(f"d{i}" for i in range(n)))
    judgments = {item.key: (1 if i % 2 == 0 else 0) for i, item in enumerate(displayed)}
    return displayed, judgments


def test_noisy_is_deterministic_across_calls() -> None:
    displayed, judgments = noisy_corpus(40)
    policy = NoisyPolicy(depth=40, p_relevant=0.5, p_false_relevant=0.5, seed=7)
    first = judge(policy, displayed, judgments)
    assert judge(policy, displayed, judgments) == first
    twin = NoisyPolicy(depth=40, p_relevant=0.5, p_false_relevant=0.5, seed=7)
    assert judge(twin, displayed, judgments) == first
    # the draws are not degenerate: both labels occur
    assert {m.label for m in first} == {R, IRR}


@pytest.mark.parametrize(
    "policy",
    [NoisyPolicy(depth=40, p_relevant=0.5, p_false_relevant=0.5), RandomPolicy(depth=40)],
)
def test_draw_per_document_does_not_depend_on_display_order(policy: UserPolicy) -> None:
    displayed, judgments = noisy_corpus(40)
    forward = judge(policy, displayed, judgments)
    backward = judge(policy, displayed[::-1], judgments)
    assert dict((m.key, m.label) for m in forward) == dict((m.key, m.label) for m in backward)
    # and a document's draw does not depend on which other documents were shown
    alone = {m.key: m.label for m in forward}
    for item in displayed[:5]:
        assert judge(policy, [item], judgments) == [Mark(item.key, alone[item.key])]


def test_draws_change_with_seed_query_and_round() -> None:
    displayed, judgments = noisy_corpus(60)
    base = NoisyPolicy(depth=60, p_relevant=0.5, p_false_relevant=0.5, seed=1)
    reference = judge(base, displayed, judgments)
    other_seed = NoisyPolicy(depth=60, p_relevant=0.5, p_false_relevant=0.5, seed=2)
    assert judge(other_seed, displayed, judgments) != reference
    assert judge(base, displayed, judgments, query_id="q2") != reference
    assert judge(base, displayed, judgments, round=2) != reference


_CHILD = """
import json, sys
from evidence_bench.evidence import Evidence
from evidence_bench.users.policies import NoisyPolicy
docs = [Evidence(title=str(i), url=f"https://example.org/d{i}", snippet="") for i in range(40)]
judgments = {d.key: i % 2 for i, d in enumerate(docs)}
marks = NoisyPolicy(depth=40, p_relevant=0.5, p_false_relevant=0.5, seed=7).judge(
    query_id="q1", round=1, displayed=docs, judgments=judgments, examined=frozenset())
print(json.dumps([[m.key, m.label] for m in marks]))
"""


def test_noisy_is_deterministic_across_processes() -> None:
    root = Path(users_module.__file__).resolve().parents[2]
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
        done = subprocess.run(
            [sys.executable, "-c", _CHILD], capture_output=True, text=True, env=env, check=True
        )
        outputs.append(json.loads(done.stdout))
    displayed, _ = noisy_corpus(40)
    judgments = {item.key: i % 2 for i, item in enumerate(displayed)}
    here = judge(
        NoisyPolicy(depth=40, p_relevant=0.5, p_false_relevant=0.5, seed=7), displayed, judgments
    )
    assert outputs[0] == outputs[1] == [[m.key, m.label] for m in here]


def rate_of_relevant(policy: UserPolicy, displayed: list[Evidence], grade: int) -> float:
    judgments = {item.key: grade for item in displayed}
    marks = []
    for round in range(1, 4):
        marks += judge(policy, displayed, judgments, round=round)
    return sum(m.label is R for m in marks) / len(marks)


def test_noisy_rates_approach_their_probabilities() -> None:
    displayed = show(*(f"d{i}" for i in range(1000)))
    policy = NoisyPolicy(depth=1000, p_relevant=0.8, p_false_relevant=0.1, seed=3)
    # 3000 Bernoulli draws: standard error <= 0.0092, so 0.04 is > 4 standard errors
    assert rate_of_relevant(policy, displayed, grade=1) == pytest.approx(0.8, abs=0.04)
    assert rate_of_relevant(policy, displayed, grade=0) == pytest.approx(0.1, abs=0.04)
    # unjudged is treated as non-relevant
    unjudged = [m for m in judge(policy, displayed, {}) if m.label is R]
    assert len(unjudged) / len(displayed) == pytest.approx(0.1, abs=0.05)


def test_random_ignores_qrels() -> None:
    displayed = show(*(f"d{i}" for i in range(1000)))
    policy = RandomPolicy(depth=1000, p_mark=0.3, seed=5)
    relevant = judge(policy, displayed, {item.key: 2 for item in displayed})
    non_relevant = judge(policy, displayed, {item.key: 0 for item in displayed})
    assert relevant == non_relevant
    assert all(m.label in (R, IRR) for m in relevant)
    assert rate_of_relevant(policy, displayed, grade=1) == pytest.approx(0.3, abs=0.04)


def test_extreme_probabilities_are_exact() -> None:
    displayed, judgments = noisy_corpus(20)
    perfect = NoisyPolicy(depth=20, p_relevant=1.0, p_false_relevant=0.0)
    expected = [R if judgments[item.key] else IRR for item in displayed]
    assert [m.label for m in judge(perfect, displayed, judgments)] == expected


def test_registry_names_match_classes() -> None:
    assert set(POLICIES) == {
        "oracle",
        "noisy",
        "positive_only",
        "negative_only",
        "patient",
        "random",
    }
    for name, cls in POLICIES.items():
        policy = cls()
        assert type(policy) is cls
        assert policy.name == name
        assert isinstance(policy, UserPolicy)


@pytest.mark.parametrize(
    ("policy", "kinds"),
    [
        (OraclePolicy(), {POS, NEG}),
        (OraclePolicy(unjudged="skip"), {POS, NEG}),  # judged non-relevant are still marked
        (OraclePolicy(budget=0), set()),
        (PositiveOnlyPolicy(), {POS}),
        (NegativeOnlyPolicy(), {NEG}),
        (PatientPolicy(), {POS, NEG}),
        (NoisyPolicy(), {POS, NEG}),
        (NoisyPolicy(p_relevant=0.0, p_false_relevant=0.0), {NEG}),
        (NoisyPolicy(p_relevant=1.0, p_false_relevant=1.0), {POS}),
        (RandomPolicy(), {POS, NEG}),
        (RandomPolicy(p_mark=0.0), {NEG}),
        (RandomPolicy(p_mark=1.0), {POS}),
        (RandomPolicy(budget=0), set()),
    ],
)
def test_each_policy_declares_the_kinds_of_label_it_gives(
    policy: UserPolicy, kinds: set[LabelKind]
) -> None:
    assert policy.expects == kinds


def test_label_kinds_are_label_polarities() -> None:
    assert LabelKind.POSITIVE.labels == (Label.MORE, Label.RELEVANT)
    assert LabelKind.NEGATIVE.labels == (Label.LESS, Label.IRRELEVANT)


def test_a_config_passes_the_params_its_kind_takes() -> None:
    policy = make_user("u", {"kind": "patient", "depth": 5, "patience": 2, "budget": 1})
    assert policy == PatientPolicy(depth=5, patience=2, budget=1)


def test_an_unknown_kind_lists_valid_names() -> None:
    with pytest.raises(
        ConfigurationError, match=r"policies\.u\.kind='orcale' is not known"
    ) as info:
        make_user("u", {"kind": "orcale"})
    for name in POLICIES:
        assert name in str(info.value)


def test_a_parameter_the_kind_does_not_take_is_named() -> None:
    message = r"policies\.u\.patience=5: kind 'oracle' does not take 'patience' \(it takes: dep"
    with pytest.raises(ConfigurationError, match=message):
        make_user("u", {"kind": "oracle", "patience": 5})


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("oracle", {"depth": 0}, "depth must be an integer >= 1"),
        ("oracle", {"depth": 2.5}, "depth must be an integer >= 1"),
        ("oracle", {"unjudged": "maybe"}, "unjudged must be one of irrelevant, unsure, skip"),
        ("patient", {"unjudged": "no"}, "unjudged must be one of irrelevant, unsure, skip"),
        ("oracle", {"budget": -1}, "budget must be an integer >= 0"),
        ("noisy", {"p_relevant": 1.5}, "p_relevant must be a probability"),
        ("noisy", {"seed": "x"}, "seed must be an integer"),
        ("patient", {"patience": 0}, "patience must be an integer >= 1"),
        ("random", {"p_mark": -0.1}, "p_mark must be a probability"),
        ("negative_only", {"unjudged": "unsure"}, "unjudged must be one of irrelevant, skip"),
    ],
)
def test_invalid_values_are_configuration_errors(
    name: str, params: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        POLICIES[name](**params)


# --- properties ----------------------------------------------------------------------------

AnyPolicy = (
    OraclePolicy
    | PositiveOnlyPolicy
    | NegativeOnlyPolicy
    | PatientPolicy
    | NoisyPolicy
    | RandomPolicy
)
names = st.sampled_from([f"p{i}" for i in range(12)])
policies = st.one_of(
    st.builds(
        OraclePolicy,
        depth=st.integers(1, 8),
        unjudged=st.sampled_from(["irrelevant", "unsure", "skip"]),
        budget=st.none() | st.integers(0, 5),
    ),
    st.builds(PositiveOnlyPolicy, depth=st.integers(1, 8), budget=st.none() | st.integers(0, 5)),
    st.builds(
        NegativeOnlyPolicy,
        depth=st.integers(1, 8),
        unjudged=st.sampled_from(["irrelevant", "skip"]),
        budget=st.none() | st.integers(0, 5),
    ),
    st.builds(
        PatientPolicy,
        depth=st.integers(1, 8),
        patience=st.integers(1, 4),
        unjudged=st.sampled_from(["irrelevant", "unsure", "skip"]),
        budget=st.none() | st.integers(0, 5),
    ),
    st.builds(
        NoisyPolicy,
        depth=st.integers(1, 8),
        seed=st.integers(0, 100),
        budget=st.none() | st.integers(0, 5),
    ),
    st.builds(RandomPolicy, depth=st.integers(1, 8), seed=st.integers(0, 100)),
)


@settings(max_examples=200, deadline=None)
@given(
    policy=policies,
    shown=st.lists(names, max_size=15),
    judged=st.dictionaries(names, st.integers(-1, 3)),
    before=st.frozensets(names),
    query_id=st.text(max_size=5),
    round=st.integers(0, 5),
)
def test_feedback_never_invents_documents(
    policy: AnyPolicy,
    shown: list[str],
    judged: dict[str, int],
    before: frozenset[str],
    query_id: str,
    round: int,
) -> None:
    displayed = show(*shown)
    judgments = {key(n): g for n, g in judged.items()}
    examined = frozenset(key(n) for n in before)
    marks = judge(policy, displayed, judgments, examined, query_id=query_id, round=round)
    keys = [m.key for m in marks]
    displayed_keys = [item.key for item in displayed]
    assert set(keys) <= set(displayed_keys)
    assert not set(keys) & examined
    assert len(keys) == len(set(keys))
    depth = policy.depth
    assert len(keys) <= depth
    # examination order is display order (first occurrence)
    assert keys == sorted(keys, key=displayed_keys.index)
    if policy.budget is not None:
        assert sum(m.label is not None for m in marks) <= policy.budget
    # without a stopping rule, the user examines exactly min(depth, new results)
    if not isinstance(policy, PatientPolicy):
        new = {k for k in displayed_keys if k not in examined}
        assert len(keys) == min(depth, len(new))


@settings(max_examples=200, deadline=None)
@given(
    policy=policies,
    shown=st.lists(names, max_size=15),
    judged=st.dictionaries(names, st.integers(-1, 3)),
)
def test_a_policy_gives_only_the_kinds_it_declares(
    policy: AnyPolicy, shown: list[str], judged: dict[str, int]
) -> None:
    judgments = {key(n): g for n, g in judged.items()}
    marks = judge(policy, show(*shown), judgments)
    kinds = {kind for kind in LabelKind for m in marks if m.label in kind.labels}
    assert kinds <= policy.expects
