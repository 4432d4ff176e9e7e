"""What frozen evaluation cannot show: measures fixed by the frozen prefix.

In frozen evaluation (full freezing: Chang, Cirillo & Razon 1971, in Salton (ed.), *The
SMART Retrieval System*) every document the user examined keeps the absolute position it
was first shown at, in every ranking compared. When they are the contiguous prefix 1..p, as
in every episode, a measure that reads only the prefix takes one value whatever feedback
did: a gain of exactly 0 that is no evidence of anything. Such a measure is *fixed* for that
query, by a structural rule from the positions and the qrels alone, never from observed
values being equal (two rankings can tie by chance). A measure is fixed when

- its cutoff k is at most p (``nDCG@k``, ``P@k``, ``R@k``, ``AP@k``: only ranks 1..k count); or
- every document that can score is in the prefix (grade > 0 for nDCG, grade >= rel for the
  others): the ranks after p add no gain, and the normalizers (ideal DCG, number of relevant
  documents, the cutoff) depend on the qrels only; or
- for ``RR``, the prefix holds a document with grade >= rel: the first one is at the same
  rank in every ranking.

A (config, policy, round, stage, frozen, measure) cell is fixed when the measure is fixed for
every query in it (:func:`fixed_in_frozen` per query): ``summary.csv``'s ``fixed`` column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from evidence_bench.evaluation.measures import Measure

__all__ = ["fixed_in_frozen", "fixed_measures", "frozen_prefix"]


def frozen_prefix(pinned: Mapping[str, int]) -> list[str]:
    """The keys pinned at positions 1, 2, ..., p, for the largest p with all of 1..p pinned.

    Only a contiguous prefix is the same in every frozen ranking: a free position before a
    pinned one is filled differently by each ranking, and moves every position after it.
    """
    by_position = {position: key for key, position in pinned.items()}
    prefix: list[str] = []
    while (key := by_position.get(len(prefix) + 1)) is not None:
        prefix.append(key)
    return prefix


def fixed_in_frozen(measure: Measure, pinned: Mapping[str, int], grades: Mapping[str, int]) -> bool:
    """Whether ``measure`` has one value in every frozen ranking of a query; see the module.

    ``pinned``: each examined document's key and the absolute position it was first shown at
    (``feedback.csv``'s ``url`` and ``rank``, up to the round); ``grades``: the query's qrels
    by the same keys (unjudged documents grade 0, as in trec_eval).
    """
    return fixed_measures([measure], pinned, grades)[0]


def fixed_measures(
    measures: Sequence[Measure], pinned: Mapping[str, int], grades: Mapping[str, int]
) -> list[bool]:
    """:func:`fixed_in_frozen` for each of ``measures`` of one query and round."""
    prefix = frozen_prefix(pinned)
    held_grades = [grades.get(key, 0) for key in prefix]
    counts: dict[int, tuple[int, int]] = {}  # rel -> (held in the prefix, in the qrels)
    fixed = []
    for measure in measures:
        if measure.cutoff is not None and measure.cutoff <= len(prefix):
            fixed.append(True)
            continue
        # Documents that can score: grade >= rel (nDCG has rel 1; integer grades > 0 gain).
        rel = measure.rel
        if rel not in counts:
            counts[rel] = (
                sum(1 for grade in held_grades if grade >= rel),
                sum(1 for grade in grades.values() if grade >= rel),
            )
        held, relevant = counts[rel]
        if measure.name == "RR" and held:
            fixed.append(True)
            continue
        fixed.append(held == relevant)
    return fixed
