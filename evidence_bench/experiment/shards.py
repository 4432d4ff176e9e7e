"""Shards: one run split by query, each part run anywhere, gathered back into that run.

``shards=N shard=i`` replays the i-th of N contiguous slices of the query ids (as
``numpy.array_split`` cuts), so the shards in index order give back every per-query file's
order. A shard's manifest holds ``"shard"``; it writes its values exactly, renders no
report and leaves ``latest`` alone (:mod:`evidence_bench.experiment.gather`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from evidence_bench.collections.queryset import QuerySet
from evidence_bench.errors import ConfigurationError
from evidence_bench.experiment.plan import RunPlan
from evidence_bench.experiment.runner import QueryOutput

__all__ = ["Gathered", "shard_entry", "shard_query_set", "shard_slice"]


def shard_slice(query_ids: Sequence[str], shards: int, shard: int) -> list[str]:
    """The ``shard``-th of ``shards`` contiguous slices of ``query_ids``, as array_split cuts."""
    if shards > len(query_ids):
        raise ConfigurationError(
            f"shards={shards}: the run has {len(query_ids)} queries, so at most "
            f"{len(query_ids)} shards"
        )
    size, extra = divmod(len(query_ids), shards)
    start = shard * size + min(shard, extra)
    return list(query_ids[start : start + size + (shard < extra)])


def shard_query_set(query_set: QuerySet, plan: RunPlan) -> QuerySet:
    """The query set as the plan's shard sees it: its queries and their qrels only."""
    if plan.shards == 1:
        return query_set
    ids = shard_slice(list(query_set.queries), plan.shards, plan.shard)
    return replace(
        query_set,
        queries={qid: query_set.queries[qid] for qid in ids},
        qrels={qid: query_set.qrels[qid] for qid in ids},
    )


def shard_entry(plan: RunPlan, of: int, queries: int) -> dict[str, Any]:
    """The manifest's ``shard``: which slice of how many, and how many of ``of`` queries."""
    return {"index": plan.shard, "count": plan.shards, "queries": queries, "of": of}


@dataclass(frozen=True)
class Gathered:
    """A run's outputs read back from its shards, in query order, and the manifest entries
    that come from the shards rather than the process gathering them."""

    outputs: Sequence[QueryOutput]
    manifest: Mapping[str, Any] = field(default_factory=dict)
