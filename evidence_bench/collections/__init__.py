"""Test collections and query sets: documents, queries and graded judgments (qrels)."""

from evidence_bench.collections.beir import Collection, Document, Query, load_collection
from evidence_bench.collections.queryset import QuerySet, load_query_set

__all__ = ["Collection", "Document", "Query", "QuerySet", "load_collection", "load_query_set"]
