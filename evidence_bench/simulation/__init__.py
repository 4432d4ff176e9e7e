"""Offline stand-ins for the world: test collections and a Brave-compatible simulator."""

from evidence_bench.simulation.bm25 import BM25Index
from evidence_bench.simulation.collections import Collection, Document, Query, load_collection
from evidence_bench.simulation.simulator import (
    BraveSimulator,
    RunningSimulator,
    SimResponse,
    SimulatorTransport,
    run_server,
    serve,
)

__all__ = [
    "BM25Index",
    "BraveSimulator",
    "Collection",
    "Document",
    "Query",
    "RunningSimulator",
    "SimResponse",
    "SimulatorTransport",
    "load_collection",
    "run_server",
    "serve",
]
