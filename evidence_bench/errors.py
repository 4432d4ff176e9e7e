"""The one exception hierarchy of evidence_bench.

Every error the package raises on purpose derives from :class:`EvidenceBenchError`, so a
caller (the CLI, the experiment runner) can catch one class and print one line::

    EvidenceBenchError
    ├── ConfigurationError        missing API key, bad config value, unknown name
    ├── QueryError                empty query, over 400 characters or 50 words
    ├── FeedbackError             a mark names a position or URL the session does not hold
    ├── DataError                 a collection, qrels or run file line that cannot be read
    ├── RequestError              transport failures and timeouts (the request did not succeed)
    │   ├── ProviderStatusError   a non-2xx answer, with Brave's ``error.code`` and ``detail``
    │   │   └── RateLimitError    429, with the seconds to wait from ``X-RateLimit-Reset``
    │   └── BlockedAddressError   a web address that is not the open web (loopback, private...)
    ├── ResponseFormatError       a body that is not JSON, or not Brave's shape
    ├── ReplayMissError           a request that no cassette holds (record mode none)
    ├── RegressionError           a quality gate that failed
    ├── WriteError                an output file not written: disk full, read-only, no access
    ├── WorkerError               a worker process failed on a query, or died
    └── CacheError                LiveFetch's SQLite cache is corrupt, locked or unwritable

Errors of dependencies are translated where they occur, with ``raise ... from exc``. Every
error survives pickling with its class, message and attributes (workers send them).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BlockedAddressError", "CacheError", "ConfigurationError", "DataError", "EvidenceBenchError",
    "FeedbackError", "ProviderStatusError", "QueryError", "RateLimitError", "RegressionError",
    "ReplayMissError", "RequestError", "ResponseFormatError", "WorkerError", "WriteError",
]  # fmt: skip


class EvidenceBenchError(Exception):
    """Base class: its message is one line that names what is at fault."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The default rebuilds an error as ``cls(*self.args)``, which fails for a subclass
        # whose __init__ takes other arguments than its message (ProviderStatusError).
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(
    cls: type[EvidenceBenchError], args: tuple[Any, ...], state: dict[str, Any]
) -> EvidenceBenchError:
    """An unpickled error: its class, its args (the message) and its attributes, as they
    were, without calling ``__init__`` again."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigurationError(EvidenceBenchError):
    """Set-up is wrong before anything ran: a missing key, an invalid setting."""


class QueryError(EvidenceBenchError, ValueError):
    """A query that Brave would refuse; raised before any request is sent."""


class FeedbackError(EvidenceBenchError, ValueError):
    """A feedback mark names something the session does not hold."""


class DataError(EvidenceBenchError):
    """An input file (collection, qrels, run, baseline) is malformed; names file and line."""


class RequestError(EvidenceBenchError):
    """A request to the search provider did not succeed."""


class BlockedAddressError(RequestError):
    """A web-sourced URL leads to an address that is not the open web (loopback, private,
    link-local, multicast, unspecified or reserved); refused before any byte is sent."""


class ProviderStatusError(RequestError):
    """The provider answered with a non-2xx status.

    Brave answers a missing or invalid token with 422 (not 401): ``code`` tells them apart.
    """

    def __init__(self, status: int, code: str | None, detail: str | None, url: str = "") -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.url = url
        what = f"{code}: {detail}" if code or detail else "no error body"
        super().__init__(f"Brave answered HTTP {status} ({what})")


class RateLimitError(ProviderStatusError):
    """HTTP 429; ``retry_after`` is the seconds Brave says the window needs to reset."""

    def __init__(
        self,
        status: int,
        code: str | None,
        detail: str | None,
        url: str = "",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, code, detail, url)
        self.retry_after = retry_after


class ResponseFormatError(EvidenceBenchError):
    """The provider's body is not JSON, or lacks the field the engine needs (named)."""


class ReplayMissError(EvidenceBenchError):
    """A request was not found in its cassette while replaying with record mode ``none``."""


class RegressionError(EvidenceBenchError):
    """A run is worse than its baseline beyond tolerance."""


class WriteError(EvidenceBenchError):
    """An output file (cassette, manifest, baseline, run) could not be written; names the
    file and the reason. What was there before is left as it was."""


class WorkerError(EvidenceBenchError):
    """A run's worker failed on a query with an unexpected error, or its process died."""


class CacheError(EvidenceBenchError):
    """LiveFetch's page cache (SQLite) cannot be used: not a database, damaged, locked
    beyond the busy timeout, or not writable; the message names the file."""
