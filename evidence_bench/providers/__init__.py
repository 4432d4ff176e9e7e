"""Search providers: where candidate evidence comes from (Brave's Web Search API)."""

from evidence_bench.providers.brave import BraveProvider, HttpClient, RetryPolicy

__all__ = ["BraveProvider", "HttpClient", "RetryPolicy"]
