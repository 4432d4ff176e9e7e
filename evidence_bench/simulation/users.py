"""Simulated users: feedback policies that judge displayed results from the qrels.

A policy plays the user of one feedback round. It scans the displayed list from the top,
skipping results it examined in an earlier round (a user scans past what they already
judged), examines up to ``depth`` new results and returns one :class:`Mark` per examined
result, in examination order, so the caller knows exactly what was looked at. A mark's label
is ``None`` when the result was examined but not marked ("seen").

Judgments come from the qrels of the current query: ``judgments`` maps a canonical URL
(:attr:`Evidence.key`) to its grade; grade ``<= 0`` is judged non-relevant and an absent key
is unjudged. A result that appears twice in one displayed list is examined once.

Randomness (``NoisyPolicy``, ``RandomPolicy``) is one draw per document, derived from
``(seed, query_id, round, key)`` with SHA-256, never from Python's salted ``hash()``: the same
document in the same round gets the same draw whatever the list order, the other documents
shown, the process or the parallelism. Policies sharing a seed share draws (common random
numbers), which lowers the variance of comparisons between them.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, fields
from typing import ClassVar, Literal, Protocol, runtime_checkable

from evidence_bench.engine.base import Label
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence

__all__ = [
    "POLICIES",
    "Mark",
    "NegativeOnlyPolicy",
    "NoisyPolicy",
    "OraclePolicy",
    "PatientPolicy",
    "PositiveOnlyPolicy",
    "RandomPolicy",
    "UserPolicy",
    "make_policy",
]


@dataclass(frozen=True, slots=True)
class Mark:
    """One examined result: its canonical URL and the label given, ``None`` for "seen"."""

    key: str
    label: Label | None


@runtime_checkable
class UserPolicy(Protocol):
    """A simulated user: judges one round of displayed results.

    Returns one mark per examined result, in examination order; never names a result that
    was not displayed or whose key is in ``examined``, and never examines more than its depth.
    """

    @property
    def name(self) -> str: ...

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]: ...


# --- shared mechanics ----------------------------------------------------------------------


def _scan(displayed: Sequence[Evidence], examined: Set[str], depth: int) -> Iterator[str]:
    """Keys of the first ``depth`` results not examined before, top first, each once."""
    seen_now: set[str] = set()
    for item in displayed:
        if len(seen_now) >= depth:
            return
        key = item.key
        if key in examined or key in seen_now:
            continue
        seen_now.add(key)
        yield key


def _within_budget(labels: list[tuple[str, Label | None]], budget: int | None) -> list[Mark]:
    """Marks in order; once ``budget`` labels were given, later results are only "seen".

    The user keeps examining to ``depth`` after the budget is spent, so the examined set (and
    what later rounds skip) does not depend on the budget, only the amount of feedback does.
    """
    marks: list[Mark] = []
    given = 0
    for key, label in labels:
        if label is not None:
            if budget is not None and given >= budget:
                label = None
            else:
                given += 1
        marks.append(Mark(key, label))
    return marks


def _draw(seed: int, query_id: str, round: int, key: str) -> float:
    """A uniform [0, 1) draw fixed by (seed, query_id, round, key), stable across processes.

    JSON encodes the tuple unambiguously (a ``|`` in a query_id cannot shift fields).
    """
    material = json.dumps([seed, query_id, round, key]).encode()
    digest = hashlib.sha256(material).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).random()


def _is_relevant(grade: int | None) -> bool:
    """Judged with a positive grade; unjudged counts as non-relevant (the TREC assumption)."""
    return grade is not None and grade > 0


def _oracle_label(
    grade: int | None, strong_grade: int, unjudged: Literal["unsure", "skip"]
) -> Label | None:
    if grade is None:
        return Label.UNSURE if unjudged == "unsure" else None
    if grade >= strong_grade:
        return Label.MORE
    if grade >= 1:
        return Label.RELEVANT
    return Label.IRRELEVANT


def _require_int(owner: str, name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{owner}: {name} must be an integer >= {minimum}, got {value!r}")


def _require_probability(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"{owner}: {name} must be a probability in [0, 1], got {value!r}")


def _require_budget(owner: str, budget: object) -> None:
    if budget is not None:
        _require_int(owner, "budget", budget, 0)


def _require_choice(owner: str, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        valid = ", ".join(choices)
        raise ConfigurationError(f"{owner}: {name} must be one of {valid}; got {value!r}")


# --- policies ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OraclePolicy:
    """Labels exactly as the qrels say: a perfect, tireless assessor (the upper bound).

    grade >= ``strong_grade`` -> MORE, 1 <= grade < ``strong_grade`` -> RELEVANT, grade <= 0
    -> IRRELEVANT; unjudged -> UNSURE or "seen", per ``unjudged``.
    """

    name: ClassVar[str] = "oracle"
    depth: int = 10
    strong_grade: int = 2
    unjudged: Literal["unsure", "skip"] = "skip"
    budget: int | None = None

    def __post_init__(self) -> None:
        _require_int(self.name, "depth", self.depth, 1)
        _require_int(self.name, "strong_grade", self.strong_grade, 1)
        _require_choice(self.name, "unjudged", self.unjudged, ("unsure", "skip"))
        _require_budget(self.name, self.budget)

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        labels = [
            (key, _oracle_label(judgments.get(key), self.strong_grade, self.unjudged))
            for key in _scan(displayed, examined, self.depth)
        ]
        return _within_budget(labels, self.budget)


@dataclass(frozen=True, slots=True)
class PositiveOnlyPolicy:
    """Oracle labels, but only the positive ones: non-relevant and unjudged results are seen.

    Models a user who only ever clicks "relevant" (pseudo-negative-free feedback).
    """

    name: ClassVar[str] = "positive_only"
    depth: int = 10
    strong_grade: int = 2
    budget: int | None = None

    def __post_init__(self) -> None:
        _require_int(self.name, "depth", self.depth, 1)
        _require_int(self.name, "strong_grade", self.strong_grade, 1)
        _require_budget(self.name, self.budget)

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        labels: list[tuple[str, Label | None]] = []
        for key in _scan(displayed, examined, self.depth):
            grade = judgments.get(key)
            label = _oracle_label(grade, self.strong_grade, "skip")
            labels.append((key, label if _is_relevant(grade) else None))
        return _within_budget(labels, self.budget)


@dataclass(frozen=True, slots=True)
class NegativeOnlyPolicy:
    """Only IRRELEVANT marks: judged non-relevant results are marked, relevant ones are seen.

    ``unjudged="irrelevant"`` also marks unjudged results IRRELEVANT (the TREC assumption);
    the default leaves them seen, so only judged evidence drives the feedback.
    """

    name: ClassVar[str] = "negative_only"
    depth: int = 10
    unjudged: Literal["irrelevant", "skip"] = "skip"
    budget: int | None = None

    def __post_init__(self) -> None:
        _require_int(self.name, "depth", self.depth, 1)
        _require_choice(self.name, "unjudged", self.unjudged, ("irrelevant", "skip"))
        _require_budget(self.name, self.budget)

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        labels: list[tuple[str, Label | None]] = []
        for key in _scan(displayed, examined, self.depth):
            grade = judgments.get(key)
            if grade is None:
                label = Label.IRRELEVANT if self.unjudged == "irrelevant" else None
            else:
                label = None if _is_relevant(grade) else Label.IRRELEVANT
            labels.append((key, label))
        return _within_budget(labels, self.budget)


@dataclass(frozen=True, slots=True)
class PatientPolicy:
    """Oracle labels, but the user gives up after ``patience`` consecutive non-relevant results.

    SimIIR's "consecutive non-relevant" stopping strategy (Maxwell, Azzopardi, Järvelin &
    Keskustalo 2015, "Searching and Stopping: An Analysis of Stopping Rules and Strategies",
    CIKM): the result that completes the run of ``patience`` is examined and marked, then the
    scan stops. Unjudged results count as non-relevant.
    """

    name: ClassVar[str] = "patient"
    depth: int = 20
    patience: int = 3
    strong_grade: int = 2
    unjudged: Literal["unsure", "skip"] = "skip"
    budget: int | None = None

    def __post_init__(self) -> None:
        _require_int(self.name, "depth", self.depth, 1)
        _require_int(self.name, "patience", self.patience, 1)
        _require_int(self.name, "strong_grade", self.strong_grade, 1)
        _require_choice(self.name, "unjudged", self.unjudged, ("unsure", "skip"))
        _require_budget(self.name, self.budget)

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        labels: list[tuple[str, Label | None]] = []
        run = 0
        for key in _scan(displayed, examined, self.depth):
            grade = judgments.get(key)
            labels.append((key, _oracle_label(grade, self.strong_grade, self.unjudged)))
            run = 0 if _is_relevant(grade) else run + 1
            if run >= self.patience:
                break
        return _within_budget(labels, self.budget)


@dataclass(frozen=True, slots=True)
class NoisyPolicy:
    """An assessor who errs, as SimIIR's stochastic result classifiers do.

    A relevant result (grade > 0) is marked RELEVANT with probability ``p_relevant``, else
    IRRELEVANT; a non-relevant or unjudged one (unjudged treated as non-relevant, the TREC
    assumption) is marked RELEVANT with probability ``p_false_relevant``, else IRRELEVANT.
    """

    name: ClassVar[str] = "noisy"
    depth: int = 10
    p_relevant: float = 0.8
    p_false_relevant: float = 0.1
    seed: int = 0
    budget: int | None = None

    def __post_init__(self) -> None:
        _require_int(self.name, "depth", self.depth, 1)
        _require_probability(self.name, "p_relevant", self.p_relevant)
        _require_probability(self.name, "p_false_relevant", self.p_false_relevant)
        _require_int(self.name, "seed", self.seed, -(2**63))
        _require_budget(self.name, self.budget)

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        labels: list[tuple[str, Label | None]] = []
        for key in _scan(displayed, examined, self.depth):
            p = self.p_relevant if _is_relevant(judgments.get(key)) else self.p_false_relevant
            hit = _draw(self.seed, query_id, round, key) < p
            labels.append((key, Label.RELEVANT if hit else Label.IRRELEVANT))
        return _within_budget(labels, self.budget)


@dataclass(frozen=True, slots=True)
class RandomPolicy:
    """A control that ignores the qrels: each examined result is marked RELEVANT with
    probability ``p_mark``, else IRRELEVANT.

    Every examined result gets a mark, so it gives as much feedback as an oracle on fully
    judged results; only its validity differs. A valid benchmark must not reward it.
    """

    name: ClassVar[str] = "random"
    depth: int = 10
    p_mark: float = 0.5
    seed: int = 0
    budget: int | None = None

    def __post_init__(self) -> None:
        _require_int(self.name, "depth", self.depth, 1)
        _require_probability(self.name, "p_mark", self.p_mark)
        _require_int(self.name, "seed", self.seed, -(2**63))
        _require_budget(self.name, self.budget)

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        labels: list[tuple[str, Label | None]] = []
        for key in _scan(displayed, examined, self.depth):
            hit = _draw(self.seed, query_id, round, key) < self.p_mark
            labels.append((key, Label.RELEVANT if hit else Label.IRRELEVANT))
        return _within_budget(labels, self.budget)


# --- registry ------------------------------------------------------------------------------

#: Policy classes by name, the names used in configs and reports.
POLICIES: dict[str, type[UserPolicy]] = {
    cls.name: cls
    for cls in (
        OraclePolicy,
        NoisyPolicy,
        PositiveOnlyPolicy,
        NegativeOnlyPolicy,
        PatientPolicy,
        RandomPolicy,
    )
}


def make_policy(name: str, **params: object) -> UserPolicy:
    """The policy called ``name`` with ``params``; a bad name, parameter or value is a
    :class:`ConfigurationError` that lists the valid choices."""
    cls = POLICIES.get(name)
    if cls is None:
        valid = ", ".join(sorted(POLICIES))
        raise ConfigurationError(f"unknown user policy {name!r} (valid: {valid})")
    accepted = [f.name for f in fields(cls)]  # type: ignore[arg-type]
    for param in params:
        if param not in accepted:
            valid = ", ".join(accepted)
            raise ConfigurationError(
                f"unknown parameter {param!r} for user policy {name!r} (valid: {valid})"
            )
    return cls(**params)
