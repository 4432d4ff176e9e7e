"""The web as the engine sees it: the Brave provider, a Brave-compatible simulator serving a
collection, and vcrpy cassettes that record and replay what crossed the wire.

The names below are imported on first use (:mod:`evidence_bench._lazy`), so importing one
module of the package (``evidence_bench.web.cassettes``) does not import the others.
"""

from typing import TYPE_CHECKING

from evidence_bench._lazy import attach

if TYPE_CHECKING:
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
    "BM25Index", "BraveProvider", "BraveSimulator", "HttpClient", "RetryPolicy", "RunningSimulator",
    "SimResponse", "SimulatorTransport", "run_server", "serve",
]  # fmt: skip

__getattr__, __dir__ = attach(
    __name__,
    {
        "evidence_bench.web.bm25": ["BM25Index"],
        "evidence_bench.web.brave": ["BraveProvider", "HttpClient", "RetryPolicy"],
        "evidence_bench.web.simulator": [
            "BraveSimulator", "RunningSimulator", "SimResponse", "SimulatorTransport", "run_server",
            "serve",
        ],
    },
)  # fmt: skip
del TYPE_CHECKING, attach
