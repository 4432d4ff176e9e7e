"""The one-call entry point: evidence for a query from Brave, optionally re-ranked."""

from __future__ import annotations

from evidence_bench.engine.base import Ranker
from evidence_bench.evidence import Evidence
from evidence_bench.web.brave import BraveProvider, HttpClient

__all__ = ["fetch_evidence"]


def fetch_evidence(
    query: str,
    *,
    limit: int = 10,
    api_key: str | None = None,
    http_client: HttpClient | None = None,
    ranker: Ranker | None = None,
    base_url: str | None = None,
) -> list[Evidence]:
    """Up to ``limit`` deduplicated results for ``query``, in Brave's order or ``ranker``'s.

    The ranker sees no feedback (``{}``): this is the first, unjudged ranking. Without
    ``http_client`` the provider opens an ``httpx.Client`` for this call and closes it after.
    Raises the errors of :class:`~evidence_bench.web.brave.BraveProvider`.
    """
    provider = BraveProvider(api_key, base_url=base_url, http_client=http_client)
    results = provider.search(query, limit=limit)
    if ranker is None:
        return results
    return ranker.rank(query, results, {})
