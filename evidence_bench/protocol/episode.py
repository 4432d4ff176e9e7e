"""One simulated episode's definition and records: a user gives feedback over rounds, and
every stage is evaluated; :func:`evidence_bench.experiment.episodes.plan_episodes` runs it.

For each round r = 1..R the user examines the displayed list (the provider's order at round
1, then the last ranking), ``show`` reranks (stage ``rerank``) and ``expand`` retrieves with
the refined query (stage ``expand``), beside the controls (``initial``, ``control``,
``shuffled``, ``deep_initial``, ``deep_control``), each cut to the length of the stage it
stands beside. Each is evaluated in the modes ``full``, ``residual`` (Salton & Buckley
1990) and ``frozen`` (full freezing, Chang, Cirillo & Razon 1971: :func:`frozen_order`).
docs/concepts/controls.rst and docs/concepts/evaluation.rst say what each measures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from evidence_bench.engine.base import Label
from evidence_bench.evaluation.measures import QueryJudgments
from evidence_bench.seeding import derived_random

__all__ = ["LABEL_TEXT", "EpisodeResult", "Judgments", "frozen_order"]


#: A mark's label as a round record (and a feedback row) holds it; None is "seen": examined,
#: unmarked.
LABEL_TEXT: dict[Label | None, str] = {None: "seen", **{label: label.value for label in Label}}


@dataclass(frozen=True, slots=True)
class Judgments:
    """One query's judgments keyed by canonical URL, prepared once for every episode."""

    grades: Mapping[str, int]
    prepared: QueryJudgments


@dataclass(slots=True, eq=False)
class EpisodeResult:
    """What one (config, user, query) episode produced.

    Its scores are kept as evaluation ids: each scored (round, stage, eval_mode) points at
    a row of ``values`` (one column per measure of ``measures``), which it may share with
    the query's other episodes; :attr:`scores` gives them as rows."""

    #: every scored (round, stage, eval_mode), in the order scored
    scored: list[tuple[int, str, str]] = field(default_factory=list)
    #: for each of ``scored``, its row of ``values``
    evaluations: list[int] = field(default_factory=list)
    #: the measures' names, the columns of ``values``
    measures: tuple[str, ...] = ()
    #: the values of each evaluation (rows, shared by the query's episodes)
    values: npt.NDArray[np.float64] = field(default_factory=lambda: np.empty((0, 0)))
    #: (round, key, label, rank) for every examined document ("seen": not marked); rank is
    #: its absolute position in the frozen list it was shown in (see frozen_order)
    feedback: list[tuple[int, str, str, int]] = field(default_factory=list)
    #: (round, stage) -> ranked keys, as evaluated in the full mode
    rankings: dict[tuple[int, str], list[str]] = field(default_factory=dict)
    #: per round: marks, refined query, added terms, rankings shown (for the report)
    rounds: list[dict[str, Any]] = field(default_factory=list)
    skipped_expand: int = 0
    #: rounds whose marks the ranker could not use (every mark unsure, or none on a
    #: candidate), so that its rerank and expand kept the no-feedback order
    no_usable_feedback: int = 0

    @property
    def scores(self) -> list[tuple[int, str, str, str, float]]:
        """(round, stage, eval_mode, measure, value) rows, in the order scored."""
        rows = self.values[self.evaluations].tolist() if self.evaluations else []
        return [
            (round_, stage, mode, name, value)
            for (round_, stage, mode), row in zip(self.scored, rows, strict=True)
            for name, value in zip(self.measures, row, strict=True)
        ]

    def __eq__(self, other: object) -> bool:
        """Equal rows, whatever evaluation ids they were stored under."""
        if not isinstance(other, EpisodeResult):
            return NotImplemented
        return (
            self.scores == other.scores
            and self.feedback == other.feedback
            and self.rankings == other.rankings
            and self.rounds == other.rounds
            and self.skipped_expand == other.skipped_expand
            and self.no_usable_feedback == other.no_usable_feedback
        )

    __hash__ = None  # type: ignore[assignment]


def frozen_order(ranking: Sequence[str], pinned: Mapping[str, int]) -> list[str]:
    """Full freezing (Chang, Cirillo & Razon 1971): each pinned key at its absolute position
    (1-based), the keys of ``ranking`` that are not pinned filling the free positions in
    ``ranking``'s order, so an evaluation credits only what feedback moves into the
    positions still free. A pinned key keeps its position whether or not ``ranking`` holds
    it; where ``ranking`` runs short of the free positions before a pinned key, the pinned
    keys after the gap move up in their order (a ranked list has no empty ranks).

    With A1..A10 pinned at 1..10 and B1, B2 at 11, 12, the ranking [B2, X, A3, B1, Y]
    gives [A1, ..., A10, B1, B2, X, Y]. Two keys pinned at one position are a ValueError.
    """
    if not pinned:
        return list(ranking)
    positions = pinned.values()
    if max(positions) == len(pinned) and min(positions) >= 1 and len(set(positions)) == len(pinned):
        # distinct positions 1..p (an episode's pins): the pinned keys in position order,
        # then the others, which is what the general rule below gives
        prefix = sorted(pinned, key=pinned.__getitem__)
        return prefix + [key for key in ranking if key not in pinned]
    slots: dict[int, str] = {}
    for key, position in pinned.items():
        if position < 1:
            raise ValueError(f"{key!r} is pinned at position {position}; positions start at 1")
        if position in slots:
            raise ValueError(f"{slots[position]!r} and {key!r} are both pinned at {position}")
        slots[position] = key
    free = [key for key in ranking if key not in pinned]
    frozen: list[str] = []
    taken = 0  # of free
    for position in sorted(slots):
        fill = min(position - 1 - len(frozen), len(free) - taken)  # free positions before it
        frozen += free[taken : taken + fill]
        taken += fill
        frozen.append(slots[position])
    return frozen + free[taken:]


def _shuffled(
    feedback: Mapping[str, Label],
    examined: Set[str],
    *,
    seed: int,
    policy: str,
    query_id: str,
    round_: int,
) -> dict[str, Label]:
    """The user's labels dealt at random over the documents the user examined (marked or
    only seen): as many marks of each kind, on documents chosen without judgment.

    The permutation is seeded by (run seed, policy, query id, round)
    (:mod:`evidence_bench.seeding`): the same in every process, another for another seed.
    """
    keys = sorted(examined)
    get = feedback.get
    labels = [get(keys[at]) for at in _permutation(seed, policy, query_id, round_, len(keys))]
    return {key: label for key, label in zip(keys, labels, strict=True) if label is not None}


@lru_cache(maxsize=1 << 12, typed=True)
def _permutation(seed: int, policy: str, query_id: str, round_: int, n: int) -> tuple[int, ...]:
    """The seeded shuffle of ``n`` items as the positions it takes them from: ``Random.shuffle``
    swaps by position whatever the items, so shuffling ``labels`` gives ``[labels[at] for at
    in _permutation(...)]``; drawn once for every user state of the same size (a user's
    states in one round examined as many documents)."""
    order = list(range(n))
    derived_random(seed, policy, query_id, round_).shuffle(order)
    return tuple(order)
