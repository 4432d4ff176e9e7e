"""Simulated users who click: the standard click models as feedback policies.

These users scan the displayed list as a click model says (Chuklin, Markov & de Rijke,
*Click Models for Web Search*, 2015), and the session learns only what a click log tells:

- a click is MORE;
- with ``skip_above="less"`` (the default), an unclicked result shown above a click is LESS
  (Joachims et al. 2005, "click > skip above"); ``"none"`` gives no negative label;
- any other examined result is "seen"; a result never examined is no mark at all.

The models: :class:`PositionBasedUser` (``pbm``), :class:`CascadeUser` (``cascade``) and
:class:`DbnUser` (``dbn``), with the :data:`PRESETS` α and σ per relevance level, read
from a judged grade by :func:`relevance_level`. The rank a model sees is a result's place
among the results new to the user this round. Draws are seeded
(:mod:`evidence_bench.seeding`): what happens at a rank from (seed, query_id, round,
rank), what a result does to the user from (seed, query_id, round, key), the stream
:class:`~evidence_bench.users.policies.NoisyPolicy` judges with. The models' sources, the
presets' and the reading of grades as levels: docs/concepts/users.rst ("Users who click").
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from evidence_bench.engine.base import Label
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence
from evidence_bench.seeding import derived_random
from evidence_bench.users.policies import (
    LabelKind,
    Mark,
    UserPolicy,
    _require_choice,
    _require_int,
    _require_probability,
    _scan,
)

__all__ = [
    "CLICK_MODELS", "PRESETS", "SKIP_ABOVE", "CascadeUser", "DbnUser", "PositionBasedUser",
    "SkipAbove", "relevance_level",
]  # fmt: skip

#: What a result shown above a click and not clicked becomes (Joachims et al. 2005).
SkipAbove = Literal["less", "none"]
SKIP_ABOVE: tuple[SkipAbove, ...] = ("less", "none")

#: preset -> (α: P(click | level 0..4), σ: P(stop | click, level 0..4)), from Oosterhuis &
#: de Rijke (2018, CIKM) and Schuth et al. (2016, WSDM), after Hofmann et al.'s binary ones.
PRESETS: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "perfect": ((0.0, 0.2, 0.4, 0.8, 1.0), (0.0, 0.0, 0.0, 0.0, 0.0)),
    "navigational": ((0.05, 0.3, 0.5, 0.7, 0.95), (0.2, 0.3, 0.5, 0.7, 0.9)),
    "informational": ((0.4, 0.6, 0.7, 0.8, 0.9), (0.1, 0.2, 0.3, 0.4, 0.5)),
}
_CLICK, _STOP = PRESETS["navigational"]


def relevance_level(grade: int | None, table: Sequence[float], top_grade: int | None) -> float:
    """The table's value for ``grade`` on a collection whose highest grade is ``top_grade``.

    Position g · (L − 1) / top_grade on the L entries, linear between them; unjudged
    (None) and g <= 0 are entry 0, g >= top_grade the last. ``top_grade`` None: the grade
    is the entry. ``relevance_level(1, (0.05, 0.3, 0.5, 0.7, 0.95), 1)`` is 0.95.
    """
    last = len(table) - 1
    if grade is None or grade <= 0:
        return table[0]
    position = min(float(last), grade * last / top_grade if top_grade else float(grade))
    low = math.floor(position)
    if low >= last:
        return table[last]
    share = position - low
    return table[low] * (1.0 - share) + table[low + 1] * share


def _table(owner: str, name: str, value: object) -> tuple[float, ...]:
    """A probability per relevance level, as a tuple (configs give lists)."""
    if isinstance(value, str) or not isinstance(value, Sequence) or len(value) < 2:
        raise ConfigurationError(
            f"{owner}: {name} must be a list of at least 2 probabilities (relevance levels "
            f"0, 1, ...), got {value!r}"
        )
    for item in value:
        _require_probability(owner, name, item)
    return tuple(float(item) for item in value)


def _check_common(user: _ClickUser) -> None:
    _require_int(user.name, "depth", user.depth, 1)
    object.__setattr__(user, "p_click", _table(user.name, "p_click", user.p_click))
    _require_choice(user.name, "skip_above", user.skip_above, SKIP_ABOVE)
    if user.top_grade is not None:
        _require_int(user.name, "top_grade", user.top_grade, 1)
    _require_int(user.name, "seed", user.seed, -(2**63))


def _at_rank(seed: int, query_id: str, round: int, rank: int) -> random.Random:
    """The draws of what happens at ``rank`` (1-based among the round's new results)."""
    return derived_random(seed, query_id, round, rank)


def _of_result(seed: int, query_id: str, round: int, key: str) -> random.Random:
    """The draws of what a result does to the user: attractiveness first, then satisfaction."""
    return derived_random(seed, query_id, round, key)


def _marks(scanned: Sequence[tuple[str, bool, bool]], skip_above: SkipAbove) -> list[Mark]:
    """Marks from ``(key, examined, clicked)`` in scan order: a click MORE; not clicked above
    the last click LESS (``skip_above="less"``, examined or not); else examined "seen"."""
    clicks = [index for index, (_, _, clicked) in enumerate(scanned) if clicked]
    last = clicks[-1] if clicks else -1
    marks: list[Mark] = []
    for index, (key, examined, clicked) in enumerate(scanned):
        if clicked:
            marks.append(Mark(key, Label.MORE))
        elif index < last and skip_above == "less":
            marks.append(Mark(key, Label.LESS))
        elif examined:
            marks.append(Mark(key, None))
    return marks


def _expects(p_click: Sequence[float], skip_above: SkipAbove, depth: int) -> frozenset[LabelKind]:
    """Positive labels if anything can be clicked; negative ones if a click can have an
    unclicked result above it (among the round's ``depth`` scanned: so not at depth 1) and
    skips count."""
    kinds: set[LabelKind] = set()
    if max(p_click) > 0:
        kinds.add(LabelKind.POSITIVE)
        if skip_above == "less" and min(p_click) < 1 and depth > 1:
            kinds.add(LabelKind.NEGATIVE)
    return frozenset(kinds)


#: ``(key, examined, clicked)`` of each result a click user scans, in order.
_Scanned = Iterator[tuple[str, bool, bool]]


class _ClickUser:
    """A click-model user: scans (:meth:`_scanned`) the first ``depth`` results not
    examined before; its marks are the clicks' (:func:`_marks`)."""

    __slots__ = ()
    name: ClassVar[str]
    depth: int
    p_click: Sequence[float]
    skip_above: SkipAbove
    top_grade: int | None
    seed: int

    def __post_init__(self) -> None:
        _check_common(self)

    @property
    def expects(self) -> frozenset[LabelKind]:
        return _expects(self.p_click, self.skip_above, self.depth)

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
        return _marks(list(self._scanned(keys, judgments, query_id, round)), self.skip_above)

    def _scanned(
        self, keys: Iterator[str], judgments: Mapping[str, int], query_id: str, round: int
    ) -> _Scanned:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class PositionBasedUser(_ClickUser):
    """The position-based model (Richardson et al. 2007; Craswell et al. 2008): each of the
    round's first ``depth`` new results is examined with probability (1/r)^``eta``
    (Joachims, Swaminathan & Schnabel 2017) and, if examined, clicked with probability
    α(level) (``p_click``): P(click at r) = P(E_r) · α(g)."""

    name: ClassVar[str] = "pbm"
    depth: int = 10
    p_click: Sequence[float] = field(default=_CLICK)
    eta: float = 1.0
    skip_above: SkipAbove = "less"
    top_grade: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        _check_common(self)
        eta = self.eta
        if isinstance(eta, bool) or not isinstance(eta, int | float) or not 0 <= eta < math.inf:
            raise ConfigurationError(f"{self.name}: eta must be a number >= 0, got {eta!r}")

    def examination(self, rank: int) -> float:
        """P(E_r) = (1/r)^η (Joachims, Swaminathan & Schnabel 2017)."""
        return float((1.0 / rank) ** self.eta)

    def _scanned(
        self, keys: Iterator[str], judgments: Mapping[str, int], query_id: str, round: int
    ) -> _Scanned:
        for rank, key in enumerate(keys, start=1):
            looked = _at_rank(self.seed, query_id, round, rank).random() < self.examination(rank)
            attractive = _of_result(self.seed, query_id, round, key).random() < relevance_level(
                judgments.get(key), self.p_click, self.top_grade
            )
            yield key, looked, looked and attractive


@dataclass(frozen=True, slots=True)
class CascadeUser(_ClickUser):
    """The cascade model (Craswell et al. 2008): top-down over the round's first ``depth``
    new results, click with probability α(level) (``p_click``), stop after the first click:
    P(click at r) = α(g_r) · Π_{i<r} (1 − α(g_i))."""

    name: ClassVar[str] = "cascade"
    depth: int = 10
    p_click: Sequence[float] = field(default=_CLICK)
    skip_above: SkipAbove = "less"
    top_grade: int | None = None
    seed: int = 0

    def _scanned(
        self, keys: Iterator[str], judgments: Mapping[str, int], query_id: str, round: int
    ) -> _Scanned:
        for key in keys:
            level = relevance_level(judgments.get(key), self.p_click, self.top_grade)
            clicked = _of_result(self.seed, query_id, round, key).random() < level
            yield key, True, clicked
            if clicked:
                return


@dataclass(frozen=True, slots=True)
class DbnUser(_ClickUser):
    """The DBN with satisfaction (Chapelle & Zhang 2009): top-down over the round's first
    ``depth`` new results, click with probability α(level) (``p_click``), after a click stop
    satisfied with probability σ(level) (``p_stop``), else go on with probability γ
    (``p_continue``): P(E_{r+1} | E_r) = γ (1 − C_r σ(g_r))."""

    name: ClassVar[str] = "dbn"
    depth: int = 10
    p_click: Sequence[float] = field(default=_CLICK)
    p_stop: Sequence[float] = field(default=_STOP)
    p_continue: float = 1.0
    skip_above: SkipAbove = "less"
    top_grade: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        _check_common(self)
        object.__setattr__(self, "p_stop", _table(self.name, "p_stop", self.p_stop))
        _require_probability(self.name, "p_continue", self.p_continue)

    def _scanned(
        self, keys: Iterator[str], judgments: Mapping[str, int], query_id: str, round: int
    ) -> _Scanned:
        for rank, key in enumerate(keys, start=1):
            grade = judgments.get(key)
            draws = _of_result(self.seed, query_id, round, key)
            clicked = draws.random() < relevance_level(grade, self.p_click, self.top_grade)
            satisfied = draws.random() < relevance_level(grade, self.p_stop, self.top_grade)
            yield key, True, clicked
            if clicked and satisfied:
                return
            if _at_rank(self.seed, query_id, round, rank).random() >= self.p_continue:
                return


#: Click-model users by kind, the names configs use (``policies.<name>.kind``).
CLICK_MODELS: dict[str, type[UserPolicy]] = {
    cls.name: cls for cls in (PositionBasedUser, CascadeUser, DbnUser)
}
