"""LiveFetch's page cache: fetched, extracted pages in one SQLite file.

The schema is the LiveFetch design's::

    docs(key PRIMARY KEY, extractor, url, content_sha256, fetched_at, published_at, title,
         text)

``key`` is the sha256 of the URL asked for, ``extractor`` the
:data:`~evidence_bench.web.page_text.EXTRACTOR_VERSION` that extracted ``text`` (a row of
another version is a miss), ``url`` the URL redacted, the dates ISO-8601 in UTC, ``text``
the text before clipping. Rows of the older schema (keyed by ``url``) are dropped on open.

The file is in WAL mode, so readers and the writer never block each other and a killed
writer leaves the last commit; each thread and process has its own connection, kept until
:meth:`PageCache.close`, and writes are single-statement upserts. Every text is stored with
the API key redacted. A file that is not a database, is damaged, or stays locked past the
busy timeout raises :class:`~evidence_bench.errors.CacheError` naming the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from evidence_bench._secrets import redact
from evidence_bench.errors import CacheError
from evidence_bench.livefetch.records import as_utc
from evidence_bench.web.page_text import EXTRACTOR_VERSION

__all__ = ["DEFAULT_CACHE_PATH", "CachedDoc", "PageCache"]

#: Where the cache lives unless told otherwise (relative to the working directory).
DEFAULT_CACHE_PATH = "livefetch.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs (
    key TEXT PRIMARY KEY,
    extractor INTEGER NOT NULL,
    url TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    fetched_at TEXT NOT NULL,
    published_at TEXT,
    title TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL DEFAULT ''
)
"""
_UPSERT = """
INSERT INTO docs (key, extractor, url, content_sha256, fetched_at, published_at, title, text)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT(key) DO UPDATE SET
    extractor = excluded.extractor, url = excluded.url,
    content_sha256 = excluded.content_sha256, fetched_at = excluded.fetched_at,
    published_at = excluded.published_at, title = excluded.title, text = excluded.text
"""


@dataclass(frozen=True, slots=True)
class CachedDoc:
    """One row of ``docs``; datetimes aware, in UTC."""

    url: str
    content_sha256: str
    fetched_at: datetime
    published_at: datetime | None
    title: str
    text: str


def _key(url: str) -> str:
    """The row's key: the sha256 of the URL as asked for."""
    return hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()


def _create(connection: sqlite3.Connection) -> None:
    """The ``docs`` table, created, or recreated empty over the schema before (keyed by the
    redacted URL, with no extractor version), in one transaction."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(docs)")}
        if columns and "extractor" not in columns:
            connection.execute("DROP TABLE docs")
        connection.execute(_SCHEMA)
        connection.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            connection.execute("ROLLBACK")
        raise


class PageCache:
    """The SQLite cache at ``path`` (created with its directory on first use).

    :meth:`get` returns a row fetched less than ``max_age`` before ``now``, else None (a
    stale row counts as a miss and is overwritten by the next :meth:`put`). ``busy_timeout_s``
    is how long an operation waits for another writer's lock before raising
    :class:`CacheError`.
    """

    def __init__(
        self,
        path: str | Path = DEFAULT_CACHE_PATH,
        *,
        max_age: timedelta = timedelta(days=1),
        busy_timeout_s: float = 30.0,
    ) -> None:
        if max_age < timedelta(0):
            raise CacheError(f"cache max_age must be >= 0, got {max_age}")
        self.path = Path(path)
        self.max_age = max_age
        self._busy_timeout_s = busy_timeout_s
        self._ready = False
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._pid = os.getpid()

    def __repr__(self) -> str:
        return f"PageCache({str(self.path)!r}, max_age={self.max_age!r})"

    def _fail(self, exc: sqlite3.Error | OSError) -> CacheError:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if "locked" in text or "busy" in text:
            hint = f"another process holds it past the {self._busy_timeout_s:g} s busy timeout"
        elif isinstance(exc, OSError) or "unable to open" in text or "readonly" in text:
            hint = "check the path and its permissions"
        else:
            hint = "delete it to start an empty cache, or choose another cache path"
        return CacheError(f"LiveFetch cache {self.path}: {text} ({hint})")

    def __enter__(self) -> PageCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close every thread's connection (the cache opens new ones if used again)."""
        with self._lock:
            connections, self._connections = self._connections, []
            self._local = threading.local()
        for connection in connections:
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    def _connection(self) -> sqlite3.Connection:
        if self._pid != os.getpid():
            # A forked child must not use (or close) its parent's connections: forget them.
            self._pid = os.getpid()
            self._connections = []
            self._local = threading.local()
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is not None:
            return connection
        if not self._ready:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(
            self.path,
            timeout=self._busy_timeout_s,
            isolation_level=None,
            check_same_thread=False,  # used by its own thread only; closed by close()
        )
        try:
            # In WAL mode NORMAL survives a killed process; a power cut may lose the last
            # commits, never the file.
            connection.execute("PRAGMA synchronous=NORMAL")
            with self._lock:  # threads opening their first connections at once
                if not self._ready:
                    # WAL is the file's: one thread switches it, waiting out another
                    # process doing it too (_to_wal).
                    self._refuse_foreign(connection)  # before anything writes to the file
                    self._to_wal(connection)
                    _create(connection)
                    self._ready = True
        except BaseException:
            connection.close()
            raise
        self._local.connection = connection
        with self._lock:
            self._connections.append(connection)
        return connection

    def _refuse_foreign(self, connection: sqlite3.Connection) -> None:
        """A file holding tables other than ``docs`` belongs to another application: switching
        it to WAL and adding ``docs`` would change it, so it is refused untouched."""
        rows = connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
        foreign = sorted(str(name) for (name,) in rows if name != "docs")
        if foreign:
            raise CacheError(
                f"LiveFetch cache {self.path}: holds tables the cache does not own "
                f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}); "
                "choose another cache path"
            )

    def _to_wal(self, connection: sqlite3.Connection) -> None:
        """``PRAGMA journal_mode=WAL``, tried again for up to the busy timeout while another
        process holds the file (SQLite answers it SQLITE_BUSY at once, without waiting)."""
        deadline = time.monotonic() + self._busy_timeout_s
        while True:
            try:
                connection.execute("PRAGMA journal_mode=WAL").fetchone()
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)

    @contextlib.contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        try:
            yield self._connection()
        except (sqlite3.Error, OSError) as exc:
            raise self._fail(exc) from exc

    def get(self, url: str, *, now: datetime) -> CachedDoc | None:
        """The row for ``url`` if it was fetched less than ``max_age`` before ``now`` and
        extracted by this :data:`~evidence_bench.web.page_text.EXTRACTOR_VERSION`."""
        with self._connect() as connection:
            row = connection.execute(
                "SELECT url, content_sha256, fetched_at, published_at, title, text "
                "FROM docs WHERE key = ? AND extractor = ?",
                (_key(url), EXTRACTOR_VERSION),
            ).fetchone()
        if row is None:
            return None
        try:
            fetched = as_utc(datetime.fromisoformat(row[2]))
            published = as_utc(datetime.fromisoformat(row[3])) if row[3] else None
        except (TypeError, ValueError):
            return None  # a row another program wrote badly: refetch and overwrite it
        if as_utc(now) - fetched >= self.max_age:
            return None
        return CachedDoc(row[0], row[1], fetched, published, row[4] or "", row[5] or "")

    def put(self, doc: CachedDoc) -> None:
        """Insert or replace the row for ``doc.url`` (one atomic statement), its URL, title
        and text with the API key redacted."""
        published = as_utc(doc.published_at).isoformat() if doc.published_at else None
        with self._connect() as connection:
            connection.execute(
                _UPSERT,
                (
                    _key(doc.url),
                    EXTRACTOR_VERSION,
                    redact(doc.url),
                    doc.content_sha256,
                    as_utc(doc.fetched_at).isoformat(),
                    published,
                    redact(doc.title),
                    redact(doc.text),
                ),
            )

    def __len__(self) -> int:
        with self._connect() as connection:
            (count,) = connection.execute("SELECT COUNT(*) FROM docs").fetchone()
        return int(count)
