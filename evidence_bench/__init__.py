"""evidence_bench: measure, offline and reproducibly, whether relevance feedback helps."""

__version__ = "0.1.0"
