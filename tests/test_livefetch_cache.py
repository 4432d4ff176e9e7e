"""The SQLite page cache: schema, age, WAL, concurrent use, a killed writer, bad files."""

from __future__ import annotations

import contextlib
import hashlib
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from evidence_bench.errors import CacheError
from evidence_bench.livefetch.cache import CachedDoc, PageCache

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _doc(url: str, text: str = "some text", fetched: datetime = NOW) -> CachedDoc:
    return CachedDoc(
        url=url,
        content_sha256=hashlib.sha256(text.encode()).hexdigest(),
        fetched_at=fetched,
        published_at=datetime(2026, 11, 20, tzinfo=UTC),
        title=f"title of {url}",
        text=text,
    )


def test_the_schema_is_the_seeds_and_the_file_is_in_wal_mode(tmp_path: Path) -> None:
    cache = PageCache(tmp_path / "sub" / "lf.sqlite")
    cache.put(_doc("https://a.test/1"))
    with sqlite3.connect(cache.path) as connection:
        columns = [row[1] for row in connection.execute("PRAGMA table_info(docs)")]
        primary = [row[1] for row in connection.execute("PRAGMA table_info(docs)") if row[5]]
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
    assert columns == [
        "key", "extractor", "url", "content_sha256", "fetched_at", "published_at", "title",
        "text",
    ]  # fmt: skip
    assert primary == ["key"]
    assert mode == "wal"


OLD_SCHEMA = """CREATE TABLE docs (url TEXT PRIMARY KEY, content_sha256 TEXT NOT NULL,
fetched_at TEXT NOT NULL, published_at TEXT, title TEXT NOT NULL DEFAULT '',
text TEXT NOT NULL DEFAULT '')"""


def test_a_cache_of_the_schema_before_is_emptied_not_served(tmp_path: Path) -> None:
    """Its rows were extracted by an older version (control characters kept, clipped
    otherwise): a miss, and the table rebuilt, not one of them served."""
    path = tmp_path / "lf.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(OLD_SCHEMA)
        connection.execute(
            "INSERT INTO docs VALUES (?, ?, ?, NULL, 't', ?)",
            ("https://a.test/1", "0" * 64, NOW.isoformat(), "old\x07text"),
        )
    cache = PageCache(path)
    assert cache.get("https://a.test/1", now=NOW) is None and len(cache) == 0
    cache.put(_doc("https://a.test/1", "new text"))
    assert cache.get("https://a.test/1", now=NOW) == _doc("https://a.test/1", "new text")


def test_a_row_of_another_extractor_version_is_a_miss(tmp_path: Path) -> None:
    cache = PageCache(tmp_path / "lf.sqlite")
    cache.put(_doc("https://a.test/1"))
    with contextlib.closing(sqlite3.connect(cache.path)) as connection, connection:
        connection.execute("UPDATE docs SET extractor = extractor - 1")
    assert cache.get("https://a.test/1", now=NOW) is None
    cache.put(_doc("https://a.test/1", "again"))
    assert cache.get("https://a.test/1", now=NOW) == _doc("https://a.test/1", "again")
    assert len(cache) == 1


def test_the_key_does_not_depend_on_the_api_key_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose URL holds the key: found again under another key in the environment,
    and not served for another URL that redacts to the same text."""
    cache = PageCache(tmp_path / "lf.sqlite")
    first, second = "k1-secret-aaaaaaaa", "k2-secret-bbbbbbbb"
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", first)
    cache.put(_doc(f"https://a.test/?key={first}", "first page"))
    with contextlib.closing(sqlite3.connect(cache.path)) as connection:
        stored = connection.execute("SELECT url, key FROM docs").fetchall()
    assert all(first not in value for row in stored for value in row)
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", second)
    hit = cache.get(f"https://a.test/?key={first}", now=NOW)
    assert hit is not None and hit.text == "first page"
    assert cache.get(f"https://a.test/?key={second}", now=NOW) is None


def test_the_default_path_is_livefetch_sqlite() -> None:
    assert PageCache().path == Path("livefetch.sqlite")


def test_a_row_round_trips_and_is_replaced_by_url(tmp_path: Path) -> None:
    cache = PageCache(tmp_path / "lf.sqlite")
    cache.put(_doc("https://a.test/1", "first"))
    cache.put(_doc("https://a.test/1", "second"))
    assert len(cache) == 1
    assert cache.get("https://a.test/1", now=NOW) == _doc("https://a.test/1", "second")
    assert cache.get("https://a.test/other", now=NOW) is None


def test_a_hit_counts_only_within_max_age(tmp_path: Path) -> None:
    cache = PageCache(tmp_path / "lf.sqlite", max_age=timedelta(hours=6))
    cache.put(_doc("https://a.test/1", fetched=NOW))
    assert cache.get("https://a.test/1", now=NOW + timedelta(hours=5, minutes=59)) is not None
    assert cache.get("https://a.test/1", now=NOW + timedelta(hours=6)) is None
    assert PageCache(cache.path, max_age=timedelta(0)).get("https://a.test/1", now=NOW) is None


def test_concurrent_threads_read_and_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "lf.sqlite"
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        cache = PageCache(path)
        try:
            for i in range(40):
                cache.put(_doc(f"https://t.test/{worker}/{i}", f"text {worker} {i}"))
                cache.put(_doc("https://t.test/shared", f"shared by {worker} at {i}"))
                assert cache.get(f"https://t.test/{worker}/{i}", now=NOW) is not None
        except BaseException as exc:  # re-raised in the main thread below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    cache = PageCache(path)
    assert len(cache) == 6 * 40 + 1
    shared = cache.get("https://t.test/shared", now=NOW)
    assert shared is not None  # one writer's row, whole: its hash matches its text
    assert shared.content_sha256 == hashlib.sha256(shared.text.encode()).hexdigest()


WRITER = textwrap.dedent(
    """
    import hashlib, sys
    from datetime import UTC, datetime
    from evidence_bench.livefetch.cache import CachedDoc, PageCache

    path, worker, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cache = PageCache(path)
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    for i in range(count):
        for url, text in ((f"https://p.test/{worker}/{i}", f"{worker} {i}"),
                          ("https://p.test/shared", f"shared {worker} {i}")):
            sha = hashlib.sha256(text.encode()).hexdigest()
            cache.put(CachedDoc(url, sha, now, None, "t", text))
        assert cache.get(f"https://p.test/{worker}/{i}", now=now) is not None
    print("done", flush=True)
    """
)


def _python(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_processes_read_and_write_one_file(tmp_path: Path) -> None:
    path = tmp_path / "lf.sqlite"
    workers = [_python(WRITER, str(path), str(n), "60") for n in range(3)]
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        assert out.strip() == "done"
    cache = PageCache(path)
    assert len(cache) == 3 * 60 + 1
    shared = cache.get("https://p.test/shared", now=NOW)
    assert shared is not None
    assert shared.content_sha256 == hashlib.sha256(shared.text.encode()).hexdigest()
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)


KILLED = textwrap.dedent(
    """
    import os, signal, sqlite3, sys
    from datetime import UTC, datetime
    from evidence_bench.livefetch.cache import CachedDoc, PageCache

    path = sys.argv[1]
    cache = PageCache(path)
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    cache.put(CachedDoc("https://k.test/committed", "0" * 64, now, None, "t", "kept"))
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("BEGIN IMMEDIATE")
    for i in range(500):
        connection.execute(
            "INSERT INTO docs VALUES (?, 3, ?, ?, ?, NULL, 't', ?)",
            (str(i), f"https://k.test/lost/{i}", "0" * 64, now.isoformat(), "x" * 2000),
        )
    print("in transaction", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_a_writer_killed_mid_transaction_leaves_the_last_committed_state(
    tmp_path: Path,
) -> None:
    path = tmp_path / "lf.sqlite"
    killed = _python(KILLED, str(path))
    out, err = killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL, err
    assert out.strip() == "in transaction"
    cache = PageCache(path)
    assert len(cache) == 1
    hit = cache.get("https://k.test/committed", now=NOW)
    assert hit is not None and hit.text == "kept"
    cache.put(_doc("https://k.test/after"))  # and the file takes writes again
    assert len(cache) == 2
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_a_writer_killed_between_commits_loses_nothing_committed(tmp_path: Path) -> None:
    path = tmp_path / "lf.sqlite"
    writer = _python(WRITER, str(path), "w", "100000")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # wait until it has committed some rows
        time.sleep(0.2)
        if path.exists() and _rows(path) > 20:
            break
    writer.send_signal(signal.SIGKILL)
    writer.communicate(timeout=60)
    cache = PageCache(path)
    count = len(cache)
    assert count > 20
    # Each worker row i is committed before row i + 1: the rows present are 0..n-1.
    for i in range(count - 1):
        assert cache.get(f"https://p.test/w/{i}", now=NOW) is not None, i
    with sqlite3.connect(path) as connection:
        assert connection.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def _rows(path: Path) -> int:
    try:
        with sqlite3.connect(path, timeout=5) as connection:
            return int(connection.execute("SELECT COUNT(*) FROM docs").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_a_corrupt_file_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "lf.sqlite"
    path.write_bytes(b"this is not a database, just bytes " * 200)
    with pytest.raises(CacheError) as caught:
        PageCache(path).get("https://a.test/", now=NOW)
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message and "not a database" in message


def test_a_damaged_database_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "lf.sqlite"
    cache = PageCache(path)
    for i in range(200):
        cache.put(_doc(f"https://a.test/{i}", "x" * 500))
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = bytearray(path.read_bytes())
    data[4096:12288] = b"\xff" * 8192  # overwrite the table's first pages
    path.write_bytes(bytes(data))
    with pytest.raises(CacheError) as caught:
        for i in range(200):
            PageCache(path).get(f"https://a.test/{i}", now=NOW)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_a_file_locked_past_the_busy_timeout_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "lf.sqlite"
    PageCache(path).put(_doc("https://a.test/1"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CacheError) as caught:
            PageCache(path, busy_timeout_s=0.2).put(_doc("https://a.test/2"))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    message = str(caught.value)
    assert str(path) in message and "locked" in message and "\n" not in message


def test_an_unwritable_location_is_one_line_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where a directory should be")
    path = blocker / "lf.sqlite"
    with pytest.raises(CacheError) as caught:
        PageCache(path).put(_doc("https://a.test/1"))
    assert str(path) in str(caught.value)


def _open_and_write(path: str, who: int, start: object, errors: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    try:
        cache = PageCache(Path(path), busy_timeout_s=5)
        cache.put(_doc(f"https://ex.test/{who}", f"text {who}"))
        cache.close()
    except CacheError as exc:
        errors.put(str(exc))  # type: ignore[attr-defined]


def test_processes_opening_a_new_cache_at_once_all_get_it(tmp_path: Path) -> None:
    """Switching a new file to WAL answers SQLITE_BUSY at once, without the busy timeout:
    of two processes creating the cache together, one failed ("database is locked") in
    more than half the trials. Now it waits its turn; ten trials, none may fail."""
    context = multiprocessing.get_context("fork")
    for trial in range(10):
        path = tmp_path / f"{trial}.sqlite"
        start, errors = context.Event(), context.Queue()
        workers = [
            context.Process(target=_open_and_write, args=(str(path), who, start, errors))
            for who in (1, 2)
        ]
        for worker in workers:
            worker.start()
        time.sleep(0.05)
        start.set()
        for worker in workers:
            worker.join(30)
        assert errors.empty(), errors.get()
        with PageCache(path) as cache:
            assert len(cache) == 2


@pytest.mark.parametrize(
    ("tables", "named"),
    [
        (["CREATE TABLE notes (id INTEGER, body TEXT)"], "notes"),
        (["CREATE TABLE docs (url TEXT)", "CREATE TABLE users (name TEXT)"], "users"),
    ],
)
def test_another_applications_database_is_refused_untouched(
    tmp_path: Path, tables: list[str], named: str
) -> None:
    """Another application's SQLite file: one line naming it and the foreign table, and the
    file keeps its bytes (no WAL switch, no ``docs`` table added)."""
    path = tmp_path / "app.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as other:
        for statement in tables:
            other.execute(statement)
        other.commit()
    before = path.read_bytes()
    with pytest.raises(CacheError) as caught, PageCache(path) as cache:
        cache.get("https://example.org/", now=datetime(2026, 1, 1, tzinfo=UTC))
    assert str(caught.value) == (
        f"LiveFetch cache {path}: holds tables the cache does not own ({named}); "
        "choose another cache path"
    )
    assert path.read_bytes() == before
    assert not (tmp_path / "app.sqlite-wal").exists()
