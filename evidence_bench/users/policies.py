"""Simulated users: feedback policies that judge displayed results from the qrels.

A policy plays the user of one feedback round: it scans the displayed list from the top,
skipping results it examined in an earlier round and repeats, examines up to ``depth`` new
results and returns one :class:`Mark` per examined result, in examination order (label
``None``: examined, not marked). ``judgments`` maps a canonical URL to its grade; grade
``<= 0`` is non-relevant, an absent key unjudged, and unjudged counts as non-relevant (the
TREC assumption) unless ``unjudged`` says ``unsure`` or ``skip``.

:attr:`UserPolicy.expects` names the kinds of label a policy should give, so a run can warn
when it gave none (:mod:`evidence_bench.users.labels`). Random draws are one per document,
fixed by ``(seed, query_id, round, key)`` (:mod:`evidence_bench.seeding`). The models and
their sources: docs/concepts/users.rst.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import ClassVar, Literal, Protocol, runtime_checkable

from evidence_bench.engine.base import Label
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence
from evidence_bench.seeding import derived_random

__all__ = [
    "POLICIES", "UNJUDGED", "LabelKind", "Mark", "NegativeOnlyPolicy", "NoisyPolicy",
    "OraclePolicy", "PatientPolicy", "PositiveOnlyPolicy", "RandomPolicy", "Unjudged", "UserPolicy",
]  # fmt: skip

#: What a user does with an examined result the qrels do not judge.
Unjudged = Literal["irrelevant", "unsure", "skip"]
UNJUDGED: tuple[Unjudged, ...] = ("irrelevant", "unsure", "skip")


class LabelKind(StrEnum):
    """A kind of feedback: labels that pull the query towards a result, or push it away."""

    POSITIVE = "positive"
    NEGATIVE = "negative"

    @property
    def labels(self) -> tuple[Label, ...]:
        """The labels of this kind (:attr:`Label.polarity` +1 or -1)."""
        sign = 1 if self is LabelKind.POSITIVE else -1
        return tuple(label for label in Label if label.polarity == sign)


_BOTH = frozenset(LabelKind)
_POSITIVE = frozenset({LabelKind.POSITIVE})
_NEGATIVE = frozenset({LabelKind.NEGATIVE})


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

    @property
    def expects(self) -> frozenset[LabelKind]:
        """The kinds of label this user is expected to give over a run (none of a kind is
        worth a warning: e.g. an oracle that gives no negative label)."""
        ...

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


@functools.lru_cache(maxsize=1 << 16, typed=True)
def _draw(seed: int, query_id: str, round: int, key: str) -> float:
    """A uniform [0, 1) draw fixed by (seed, query_id, round, key), stable across processes;
    remembered (typed: ``round=True`` is not ``round=1`` to the seed's JSON), since a user
    judges the same document in the same round under many rankings."""
    return derived_random(seed, query_id, round, key).random()


def _is_relevant(grade: int | None) -> bool:
    """Judged with a positive grade; unjudged counts as non-relevant (the TREC assumption)."""
    return grade is not None and grade > 0


def _oracle_label(grade: int | None, strong_grade: int, unjudged: Unjudged) -> Label | None:
    """The qrels' label: MORE from ``strong_grade`` up, RELEVANT from 1, else IRRELEVANT;
    an unjudged result (``grade`` None) as ``unjudged`` says."""
    if grade is None:
        return _UNJUDGED_LABEL[unjudged]
    if grade >= strong_grade:
        return Label.MORE
    if grade >= 1:
        return Label.RELEVANT
    return Label.IRRELEVANT


_UNJUDGED_LABEL: dict[str, Label | None] = {
    "irrelevant": Label.IRRELEVANT,
    "unsure": Label.UNSURE,
    "skip": None,
}


def _given(budget: int | None, kinds: frozenset[LabelKind]) -> frozenset[LabelKind]:
    """``kinds``, or none at all when a zero budget forbids every label."""
    return frozenset() if budget == 0 else kinds


def _marked(*p_relevant: float) -> frozenset[LabelKind]:
    """The kinds of label a user gives who marks RELEVANT with one of the probabilities
    ``p_relevant``, else IRRELEVANT."""
    kinds = {LabelKind.POSITIVE} if max(p_relevant) > 0 else set()
    return frozenset(kinds | ({LabelKind.NEGATIVE} if min(p_relevant) < 1 else set()))


def _require_int(owner: str, name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigurationError(f"{owner}: {name} must be an integer >= {minimum}, got {value!r}")


def _require_probability(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ConfigurationError(f"{owner}: {name} must be a probability in [0, 1], got {value!r}")


def _require_choice(owner: str, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        valid = ", ".join(choices)
        raise ConfigurationError(f"{owner}: {name} must be one of {valid}; got {value!r}")


#: A policy's labels of the keys it examines, in order (None: "seen").
_Labels = Iterator[tuple[str, Label | None]]
#: ``(seed, key) -> `` the round's uniform draw for ``key`` (:func:`_draw`).
_Draw = Callable[[int, str], float]


class _ScanningPolicy:
    """A policy that labels (:meth:`_labels`) the first ``depth`` results not examined
    before, within its ``budget`` (:func:`_within_budget`). Its parameters are checked by
    name: ``depth``, ``strong_grade`` and ``patience`` integers >= 1, ``seed`` an integer,
    ``budget`` None or an integer >= 0, ``p_*`` probabilities, ``unjudged`` one of
    :attr:`_unjudged`."""

    __slots__ = ()
    name: ClassVar[str]
    depth: int
    budget: int | None
    _unjudged: ClassVar[tuple[str, ...]] = UNJUDGED

    def __post_init__(self) -> None:
        for param in fields(self):  # type: ignore[arg-type]
            value = getattr(self, param.name)
            if param.name in ("depth", "strong_grade", "patience"):
                _require_int(self.name, param.name, value, 1)
            elif param.name == "seed":
                _require_int(self.name, "seed", value, -(2**63))
            elif param.name == "budget" and value is not None:
                _require_int(self.name, "budget", value, 0)
            elif param.name.startswith("p_"):
                _require_probability(self.name, param.name, value)
            elif param.name == "unjudged":
                _require_choice(self.name, "unjudged", value, self._unjudged)

    @property
    def expects(self) -> frozenset[LabelKind]:
        return _given(self.budget, self._kinds())

    def _kinds(self) -> frozenset[LabelKind]:
        """The kinds of label the policy gives with a budget that allows any."""
        return _BOTH

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        keys = _scan(displayed, examined, self.depth)
        draw = functools.partial(_round_draw, query_id, round)
        return _within_budget(list(self._labels(keys, judgments, draw)), self.budget)

    def _labels(self, keys: Iterator[str], judgments: Mapping[str, int], draw: _Draw) -> _Labels:
        raise NotImplementedError


def _round_draw(query_id: str, round: int, seed: int, key: str) -> float:
    return _draw(seed, query_id, round, key)


# --- policies ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OraclePolicy(_ScanningPolicy):
    """Labels exactly as the qrels say: a perfect, tireless assessor (the upper bound).

    grade >= ``strong_grade`` -> MORE, 1 <= grade < ``strong_grade`` -> RELEVANT, grade <= 0
    -> IRRELEVANT; unjudged -> IRRELEVANT (the TREC assumption), UNSURE or "seen", per
    ``unjudged``. Expected to give positive and negative labels.
    """

    name: ClassVar[str] = "oracle"
    depth: int = 10
    strong_grade: int = 2
    unjudged: Unjudged = "irrelevant"
    budget: int | None = None

    def _labels(self, keys: Iterator[str], judgments: Mapping[str, int], draw: _Draw) -> _Labels:
        for key in keys:
            yield key, _oracle_label(judgments.get(key), self.strong_grade, self.unjudged)


@dataclass(frozen=True, slots=True)
class PositiveOnlyPolicy(_ScanningPolicy):
    """Oracle labels, but only the positive ones: non-relevant and unjudged results are seen.

    Models a user who only ever clicks "relevant" (pseudo-negative-free feedback). Expected
    to give positive labels only.
    """

    name: ClassVar[str] = "positive_only"
    depth: int = 10
    strong_grade: int = 2
    budget: int | None = None

    def _kinds(self) -> frozenset[LabelKind]:
        return _POSITIVE

    def _labels(self, keys: Iterator[str], judgments: Mapping[str, int], draw: _Draw) -> _Labels:
        for key in keys:
            grade = judgments.get(key)
            label = _oracle_label(grade, self.strong_grade, "skip")
            yield key, label if _is_relevant(grade) else None


@dataclass(frozen=True, slots=True)
class NegativeOnlyPolicy(_ScanningPolicy):
    """Only IRRELEVANT marks: non-relevant results are marked, relevant ones are seen.

    Unjudged results are IRRELEVANT too by default (the TREC assumption); ``unjudged="skip"``
    leaves them seen, so only judged non-relevant evidence drives the feedback (on qrels that
    list only relevant documents, none). ``unsure`` is not offered: this user gives no label
    but IRRELEVANT. Expected to give negative labels only.
    """

    name: ClassVar[str] = "negative_only"
    depth: int = 10
    unjudged: Literal["irrelevant", "skip"] = "irrelevant"
    budget: int | None = None
    _unjudged: ClassVar[tuple[str, ...]] = ("irrelevant", "skip")

    def _kinds(self) -> frozenset[LabelKind]:
        return _NEGATIVE

    def _labels(self, keys: Iterator[str], judgments: Mapping[str, int], draw: _Draw) -> _Labels:
        for key in keys:
            grade = judgments.get(key)
            if grade is None:
                yield key, _UNJUDGED_LABEL[self.unjudged]
            else:
                yield key, None if _is_relevant(grade) else Label.IRRELEVANT


@dataclass(frozen=True, slots=True)
class PatientPolicy(_ScanningPolicy):
    """Oracle labels, but the user gives up after ``patience`` consecutive non-relevant results.

    SimIIR's "consecutive non-relevant" stopping strategy (Maxwell, Azzopardi, Järvelin &
    Keskustalo 2015, "Searching and Stopping: An Analysis of Stopping Rules and Strategies",
    CIKM): the result that completes the run of ``patience`` is examined and marked, then the
    scan stops. Unjudged results count as non-relevant for stopping whatever ``unjudged``
    says; ``unjudged`` only decides their label, as for :class:`OraclePolicy`. Expected to
    give positive and negative labels.
    """

    name: ClassVar[str] = "patient"
    depth: int = 20
    patience: int = 3
    strong_grade: int = 2
    unjudged: Unjudged = "irrelevant"
    budget: int | None = None

    def _labels(self, keys: Iterator[str], judgments: Mapping[str, int], draw: _Draw) -> _Labels:
        run = 0
        for key in keys:
            grade = judgments.get(key)
            yield key, _oracle_label(grade, self.strong_grade, self.unjudged)
            run = 0 if _is_relevant(grade) else run + 1
            if run >= self.patience:
                return


@dataclass(frozen=True, slots=True)
class NoisyPolicy(_ScanningPolicy):
    """An assessor who errs, as SimIIR's stochastic result classifiers do.

    A relevant result (grade > 0) is marked RELEVANT with probability ``p_relevant``, else
    IRRELEVANT; a non-relevant or unjudged one (unjudged treated as non-relevant, the TREC
    assumption) is marked RELEVANT with probability ``p_false_relevant``, else IRRELEVANT.
    Expected to give a kind of label unless both probabilities rule it out.
    """

    name: ClassVar[str] = "noisy"
    depth: int = 10
    p_relevant: float = 0.8
    p_false_relevant: float = 0.1
    seed: int = 0
    budget: int | None = None

    def _kinds(self) -> frozenset[LabelKind]:
        return _marked(self.p_relevant, self.p_false_relevant)

    def _labels(self, keys: Iterator[str], judgments: Mapping[str, int], draw: _Draw) -> _Labels:
        for key in keys:
            p = self.p_relevant if _is_relevant(judgments.get(key)) else self.p_false_relevant
            yield key, Label.RELEVANT if draw(self.seed, key) < p else Label.IRRELEVANT


@dataclass(frozen=True, slots=True)
class RandomPolicy(_ScanningPolicy):
    """A control that ignores the qrels: each examined result is marked RELEVANT with
    probability ``p_mark``, else IRRELEVANT.

    Every examined result gets a mark, so it gives as much feedback as an oracle on fully
    judged results; only its validity differs. A valid benchmark must not reward it.
    Expected to give both kinds of label unless ``p_mark`` is 0 or 1.
    """

    name: ClassVar[str] = "random"
    depth: int = 10
    p_mark: float = 0.5
    seed: int = 0
    budget: int | None = None

    def _kinds(self) -> frozenset[LabelKind]:
        return _marked(self.p_mark)

    def _labels(self, keys: Iterator[str], judgments: Mapping[str, int], draw: _Draw) -> _Labels:
        for key in keys:
            yield key, Label.RELEVANT if draw(self.seed, key) < self.p_mark else Label.IRRELEVANT


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
