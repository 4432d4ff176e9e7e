"""Helpers for the fault tests: copies of shipped cassettes to damage, a CLI runner with
resource limits, and small loopback servers. Nothing here touches the committed files."""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from evidence_bench.web.cassette_manifest import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[1]
CRANFIELD_CASSETTES = ROOT / "cassettes" / "cranfield"
#: The first five judged Cranfield queries: what ``+experiment=smoke`` replays.
SMOKE_QUERIES = ("1", "2", "3", "4", "5")


def copy_cassettes(dest: Path, query_ids: tuple[str, ...] = SMOKE_QUERIES) -> Path:
    """A private copy of some Cranfield cassettes and their manifest."""
    dest.mkdir(parents=True)
    for query_id in query_ids:
        shutil.copy(CRANFIELD_CASSETTES / f"{query_id}.json", dest)
    shutil.copy(CRANFIELD_CASSETTES / MANIFEST_NAME, dest)
    return dest


def bless(cassettes: Path, name: str) -> None:
    """Record ``name``'s current sha256 in the manifest, as ``record`` would."""
    manifest = cassettes / MANIFEST_NAME
    data = json.loads(manifest.read_text())
    data["cassettes"][name] = hashlib.sha256((cassettes / name).read_bytes()).hexdigest()
    manifest.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def edit_cassette(cassettes: Path, query_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    """Change every recorded response of a cassette copy, and bless the result."""
    path = cassettes / f"{query_id}.json"
    data = json.loads(path.read_text())
    for interaction in data["interactions"]:
        change(interaction["response"])
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    bless(cassettes, path.name)


def smoke_args(runs: Path, *extra: str) -> list[str]:
    return [
        "run",
        "+experiment=smoke",
        f"runs_dir={runs}",
        "workers=1",
        "progress=false",
        "report=false",
        *extra,
    ]


def _limit_file_size(limit: int) -> Callable[[], None]:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails: EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def cli(
    *args: str,
    module: str = "evidence_bench",
    file_size_limit: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 240,
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess[str]:
    """``python -m evidence_bench ARGS`` in a fresh process (in ``cwd``); ``file_size_limit``
    caps the size of every file it writes (RLIMIT_FSIZE), so a write fails as on a full disk."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        preexec_fn=_limit_file_size(file_size_limit) if file_size_limit else None,
    )


def main_in_process(
    *args: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> subprocess.CompletedProcess[str]:
    """``python -m evidence_bench ARGS`` as :func:`cli` runs it, but in this process (from the
    project root, stdout and stderr captured at the file descriptors): for the cases where
    what is tested is the command's answer, not the process. ``returncode`` is the exit
    status ``main`` ends with (0 when it returns); any other exception fails the test, as a
    traceback would."""
    from evidence_bench.__main__ import main

    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["evidence_bench", *args])  # run and record set it
    capfd.readouterr()
    code: int | str | None = 0
    try:
        main(list(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(
        list(args), 0 if code is None else code if isinstance(code, int) else 1, out, err
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    """The single line on stderr (asserting that it is one, without a traceback)."""
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    return lines[0]


@contextmanager
def serve_bytes(
    answer: Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]],
) -> Iterator[str]:
    """A server on 127.0.0.1 that answers every GET with ``answer(request)``; yields the
    Brave-style base URL (``http://127.0.0.1:PORT/res/v1``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            status, headers, body = answer(self)
            self.send_response_only(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/res/v1"
    finally:
        server.shutdown()
        server.server_close()
