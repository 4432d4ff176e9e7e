"""evidence_bench: measure, offline and reproducibly, whether relevance feedback helps.

The engine being measured is importable from here: fetch evidence from a Brave-compatible
API, rank it locally, take feedback in a :class:`SearchSession`, and expand the search;
or run the whole LiveFetch pipeline (:class:`LiveFetch`), from discovery to cited pages.
"""

from typing import TYPE_CHECKING

from evidence_bench._lazy import attach

if TYPE_CHECKING:
    from evidence_bench.api import fetch_evidence
    from evidence_bench.collections.beir import Document, Query
    from evidence_bench.collections.queryset import QuerySetLoader, QuerySetRecords
    from evidence_bench.engine.base import Label, Ranker, RefinedQuery, Refiner, SearchProvider
    from evidence_bench.engine.ranking import ProviderOrderRanker, TfidfRocchioRanker
    from evidence_bench.engine.refiner import LexicalRefiner
    from evidence_bench.engine.session import Expansion, SearchSession
    from evidence_bench.errors import (
        CacheError,
        ConfigurationError,
        DataError,
        EvidenceBenchError,
        FeedbackError,
        ProviderStatusError,
        QueryError,
        RateLimitError,
        RegressionError,
        ReplayMissError,
        RequestError,
        ResponseFormatError,
        WorkerError,
        WriteError,
    )
    from evidence_bench.evidence import Evidence, canonical_url, normalize_text
    from evidence_bench.livefetch import (
        EvidencePacket,
        FailureReason,
        FetchFailure,
        LiveFetch,
        PacketSet,
        RecordedDiscovery,
        RetrievalIntent,
        extract_page,
    )
    from evidence_bench.users.policies import LabelKind, Mark, UserPolicy
    from evidence_bench.web.brave import BraveProvider, HttpClient, RetryPolicy

#: The package version.
__version__ = "0.1.0"

__all__ = [
    "BraveProvider", "CacheError", "ConfigurationError", "DataError", "Document", "Evidence",
    "EvidenceBenchError", "EvidencePacket", "Expansion", "FailureReason", "FeedbackError",
    "FetchFailure", "HttpClient", "Label", "LabelKind", "LexicalRefiner", "LiveFetch", "Mark",
    "PacketSet", "ProviderOrderRanker", "ProviderStatusError", "Query", "QueryError",
    "QuerySetLoader", "QuerySetRecords", "Ranker", "RateLimitError", "RecordedDiscovery",
    "RefinedQuery", "Refiner", "RegressionError", "ReplayMissError", "RequestError",
    "ResponseFormatError", "RetrievalIntent", "RetryPolicy", "SearchProvider", "SearchSession",
    "TfidfRocchioRanker", "UserPolicy", "WorkerError", "WriteError", "__version__", "canonical_url",
    "extract_page", "fetch_evidence", "normalize_text",
]  # fmt: skip

__getattr__, __dir__ = attach(
    __name__,
    {
        "evidence_bench.api": ["fetch_evidence"],
        "evidence_bench.collections.beir": ["Document", "Query"],
        "evidence_bench.collections.queryset": ["QuerySetLoader", "QuerySetRecords"],
        "evidence_bench.engine.base": [
            "Label", "Ranker", "RefinedQuery", "Refiner", "SearchProvider",
        ],
        "evidence_bench.engine.ranking": ["ProviderOrderRanker", "TfidfRocchioRanker"],
        "evidence_bench.engine.refiner": ["LexicalRefiner"],
        "evidence_bench.engine.session": ["Expansion", "SearchSession"],
        "evidence_bench.errors": [name for name in __all__ if name.endswith("Error")],
        "evidence_bench.evidence": ["Evidence", "canonical_url", "normalize_text"],
        "evidence_bench.livefetch": [
            "EvidencePacket", "FailureReason", "FetchFailure", "LiveFetch", "PacketSet",
            "RecordedDiscovery", "RetrievalIntent", "extract_page",
        ],
        "evidence_bench.users.policies": ["LabelKind", "Mark", "UserPolicy"],
        "evidence_bench.web.brave": ["BraveProvider", "HttpClient", "RetryPolicy"],
    },
)  # fmt: skip
del TYPE_CHECKING, attach
