"""The web as the engine sees it: the Brave provider, a Brave-compatible simulator serving a
collection, and vcrpy cassettes that record and replay what crossed the wire."""

from evidence_bench.web.bm25 import BM25Index
from evidence_bench.web.brave import BraveProvider, HttpClient, RetryPolicy
from evidence_bench.web.simulator import (
    BraveSimulator,
    RunningSimulator,
    SimResponse,
    SimulatorTransport,
    run_server,
    serve,
)

__all__ = [
    "BM25Index",
    "BraveProvider",
    "BraveSimulator",
    "HttpClient",
    "RetryPolicy",
    "RunningSimulator",
    "SimResponse",
    "SimulatorTransport",
    "run_server",
    "serve",
]
