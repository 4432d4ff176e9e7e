"""k folds of a query set for cross-validation: a seeded shuffle, then dealt round-robin.

The query ids are shuffled with :func:`evidence_bench.seeding.derived_random` of
``(seed, "folds")`` and the i-th goes to fold ``i mod k``: every query held out once, the
folds' sizes differing by at most one.
"""

from __future__ import annotations

from collections.abc import Sequence

from evidence_bench.seeding import derivation, derived_random

__all__ = ["FOLD_SEED", "assign_folds", "deal"]

#: How the shuffle is seeded, for the manifest.
FOLD_SEED = derivation("seed", '"folds"')


def deal(ordered: Sequence[str], k: int) -> tuple[tuple[str, ...], ...]:
    """``ordered`` dealt into ``k`` folds: item i to fold i mod k, in order.

    ``deal("abcde", 2)`` is ``(("a", "c", "e"), ("b", "d"))``.
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    return tuple(tuple(ordered[start::k]) for start in range(k))


def assign_folds(query_ids: Sequence[str], k: int, seed: int) -> tuple[tuple[str, ...], ...]:
    """The ``k`` held-out folds of ``query_ids`` for ``seed``; each fold lists its queries
    in the query set's order. The caller checks 2 <= k <= len(query_ids)."""
    if len(set(query_ids)) != len(query_ids):
        raise ValueError("query ids must be unique")
    shuffled = list(query_ids)
    derived_random(seed, "folds").shuffle(shuffled)
    position = {query_id: index for index, query_id in enumerate(query_ids)}
    return tuple(tuple(sorted(fold, key=position.__getitem__)) for fold in deal(shuffled, k))
