"""``assess``: a page on 127.0.0.1 for judging a pool, one result at a time, by keyboard.

The page is three files of this package (``static/``) and a small JSON API:

- ``GET /api/state[?at=i]``: item ``i`` (default: the first one not judged yet), its grade,
  and the progress overall and for its query;
- ``POST /api/judge`` ``{"at": i, "grade": g}``: judge item ``i`` (saved before the answer,
  :class:`~evidence_bench.assess.judgments.Judgments`), answered with the next item not
  judged yet;
- ``POST /api/undo`` ``{}``: take back this session's last judgment, answered with its item.

Every answer carries a strict Content-Security-Policy (scripts, styles and requests from
this origin only, nothing else: no inline script, nothing fetched from outside), and the
script sets every text with ``textContent``. The server binds 127.0.0.1 only, answers only
a ``Host`` naming it (a DNS-rebinding page cannot reach it), takes a POST only as JSON
(a cross-site form cannot send one without a preflight, which is refused) of at most
:data:`MAX_BODY` bytes (else 413), and keeps nothing in memory that is not on disk.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

from evidence_bench.assess.judgments import GRADES, Judgments
from evidence_bench.experiment.pool import PoolItem

__all__ = ["CSP", "LOOPBACK", "MAX_BODY", "Assessment", "make_server"]

LOOPBACK = "127.0.0.1"
#: The largest request body taken: a judgment is ~30 bytes.
MAX_BODY = 1024
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_STATIC = {
    "/": ("assess.html", "text/html; charset=utf-8"),
    "/assess.js": ("assess.js", "text/javascript; charset=utf-8"),
    "/assess.css": ("assess.css", "text/css; charset=utf-8"),
}


class Assessment:
    """A pool and its judgments: what the API reads and changes."""

    def __init__(self, items: Sequence[PoolItem], judgments: Judgments) -> None:
        self.items = list(items)
        self.judgments = judgments
        self._by_query: dict[str, list[int]] = {}
        for number, item in enumerate(self.items):
            self._by_query.setdefault(item.query_id, []).append(number)

    def _grade(self, number: int) -> int | None:
        item = self.items[number]
        return self.judgments.grade(item.query_id, item.doc_id)

    def next_open(self, after: int = -1) -> int | None:
        """The first item after ``after`` not judged yet, wrapping round (None: all judged)."""
        count = len(self.items)
        for step in range(1, count + 1):
            number = (after + step) % count
            if self._grade(number) is None:
                return number
        return None

    def state(self, at: int | None = None) -> dict[str, Any]:
        """What the page shows: item ``at`` (default: the first not judged yet)."""
        total = len(self.items)
        judged = sum(1 for n in range(total) if self._grade(n) is not None)
        if at is None:
            at = self.next_open()
        if at is None or not 0 <= at < total:
            return {"at": max(0, total - 1), "total": total, "judged": judged, "item": None}
        item = self.items[at]
        same = self._by_query[item.query_id]
        return {
            "at": at,
            "total": total,
            "judged": judged,
            "item": {**item.to_json(), "grade": self._grade(at)},
            "query": {
                "judged": sum(1 for n in same if self._grade(n) is not None),
                "total": len(same),
            },
        }

    def judge(self, at: int, grade: int) -> dict[str, Any]:
        item = self.items[at]
        self.judgments.judge(item.query_id, item.doc_id, grade)
        return self.state(self.next_open(at))

    def undo(self) -> dict[str, Any]:
        undone = self.judgments.undo()  # its item is shown, else the first one not judged
        pairs = ((item.query_id, item.doc_id) for item in self.items)
        return self.state(next((n for n, pair in enumerate(pairs) if pair == undone), None))


class _Refused(Exception):
    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _hosts(port: int) -> tuple[str, ...]:
    """What a request's ``Host`` may name: this server's address, by number or by name."""
    return f"{LOOPBACK}:{port}", f"localhost:{port}"


def _handler(assessment: Assessment, port: list[int]) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        server_version = "evidence-bench-assess"
        sys_version = ""

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the page is the log
            pass

        def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _json(self, status: HTTPStatus, data: dict[str, Any]) -> None:
            self._send(status, json.dumps(data).encode(), "application/json")

        def _check_host(self) -> None:
            if self.headers.get("Host", "") not in _hosts(port[0]):
                raise _Refused(HTTPStatus.MISDIRECTED_REQUEST, "this server answers 127.0.0.1 only")

        def do_GET(self) -> None:
            try:
                self._check_host()
                parts = urlsplit(self.path)
                if parts.path in _STATIC:
                    name, kind = _STATIC[parts.path]
                    body = resources.files("evidence_bench.assess").joinpath("static", name)
                    self._send(HTTPStatus.OK, body.read_bytes(), kind)
                elif parts.path == "/api/state":
                    at = parse_qs(parts.query).get("at", [None])[0]
                    with lock:
                        self._json(HTTPStatus.OK, assessment.state(_index(at, assessment)))
                else:
                    raise _Refused(HTTPStatus.NOT_FOUND, "not found")
            except _Refused as exc:
                self._json(exc.status, {"error": str(exc)})

        def do_POST(self) -> None:
            try:
                self._check_host()
                body = self._body()
                path = urlsplit(self.path).path
                with lock:
                    if path == "/api/judge":
                        at = _index(body.get("at"), assessment)
                        grade = body.get("grade")
                        if at is None or not isinstance(grade, int) or grade not in GRADES:
                            raise _Refused(HTTPStatus.BAD_REQUEST, "expected {at, grade 0-3}")
                        answer = assessment.judge(at, grade)
                    elif path == "/api/undo":
                        answer = assessment.undo()
                    else:
                        raise _Refused(HTTPStatus.NOT_FOUND, "not found")
                self._json(HTTPStatus.OK, answer)
            except _Refused as exc:
                self._json(exc.status, {"error": str(exc)})

        def _body(self) -> dict[str, Any]:
            if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
                raise _Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send application/json")
            origin = self.headers.get("Origin")
            if origin is not None and origin not in [f"http://{h}" for h in _hosts(port[0])]:
                raise _Refused(HTTPStatus.FORBIDDEN, "cross-origin request refused")
            try:
                length = int(self.headers.get("Content-Length", ""))
            except ValueError:
                raise _Refused(HTTPStatus.LENGTH_REQUIRED, "Content-Length required") from None
            if not 0 <= length <= MAX_BODY:
                self.close_connection = True  # the body is not read
                raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY} bytes")
            try:
                data = json.loads(self.rfile.read(length) or b"{}")
            except (ValueError, UnicodeDecodeError):
                raise _Refused(HTTPStatus.BAD_REQUEST, "body is not JSON") from None
            if not isinstance(data, dict):
                raise _Refused(HTTPStatus.BAD_REQUEST, "body is not a JSON object")
            return data

    return Handler


def _index(value: object, assessment: Assessment) -> int | None:
    """An item number from a request (None: absent); out of range is a 400."""
    if value is None:
        return None
    try:
        number = int(str(value))
    except ValueError:
        raise _Refused(HTTPStatus.BAD_REQUEST, "at: not a whole number") from None
    if isinstance(value, bool) or not 0 <= number < len(assessment.items):
        raise _Refused(HTTPStatus.BAD_REQUEST, f"at: {value!r} is not an item of the pool")
    return number


def make_server(assessment: Assessment, port: int = 0) -> ThreadingHTTPServer:
    """The server for ``assessment`` on 127.0.0.1 (``port`` 0: one the system picks)."""
    bound = [port]
    server = ThreadingHTTPServer((LOOPBACK, port), _handler(assessment, bound))
    server.daemon_threads = True
    bound[0] = int(server.server_address[1])
    return server
