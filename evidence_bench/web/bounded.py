"""Extraction bounded in time: the page pipeline's read in a child process, killed at its
deadline.

Parsing a hostile page can take far longer than fetching it, in C code a thread cannot
stop. :class:`BoundedReader` runs :func:`~evidence_bench.web.page_text.read_page` in a child
process (``python -m evidence_bench.web._read_child``, which imports the extractors before
it reports ready). A page past its ``timeout_s`` gets
:attr:`~evidence_bench.web.failure.FailureReason.TIMEOUT` and the child is killed; a child
that dies on a page gives ``no_text``. :func:`read_page_bounded` reads by the process's one
reader, shared by LiveFetch and a live-web ``record``. Replay reads in process, unbounded,
so its texts do not depend on the machine's speed.

Requests and answers cross the pipes as length-prefixed pickles between this module and
its own child: no web content is unpickled that this package did not pickle itself.
"""

from __future__ import annotations

import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
import weakref
from typing import IO, Any

from evidence_bench.errors import WorkerError
from evidence_bench.web.failure import FailureReason
from evidence_bench.web.page_text import ExtractedPage

__all__ = ["START_TIMEOUT_S", "BoundedReader", "read_frame", "read_page_bounded", "write_frame"]

#: Seconds a new child may take to import the extractors and say it is ready.
START_TIMEOUT_S = 120.0
_HEADER = struct.Struct(">Q")
_GONE = object()  # the child's stdout closed: it exited or was killed


def write_frame(stream: IO[bytes], value: object) -> None:
    """``value`` pickled onto ``stream``, its length first."""
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next value :func:`write_frame` put on ``stream``; raises EOFError at its end."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


class _Child:
    """One child process and the thread that reads its answers into a queue."""

    def __init__(self) -> None:
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "evidence_bench.web._read_child"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise WorkerError(f"the page extraction process could not start ({exc})") from exc
        self.owner = os.getpid()
        self.answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=self._read, name="page-extract-reader", daemon=True).start()
        try:
            ready = self._answer(START_TIMEOUT_S)
        except TimeoutError:
            ready = None
        if ready != "ready":
            self.kill()
            raise WorkerError(
                "the page extraction process did not start: "
                f"{sys.executable} -m evidence_bench.web._read_child exited or was not ready "
                f"in {START_TIMEOUT_S:g} s"
            )

    def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            while True:
                self.answers.put(read_frame(self.process.stdout))
        except (EOFError, OSError, pickle.UnpicklingError):
            self.answers.put(_GONE)

    def _answer(self, timeout_s: float) -> Any:
        try:
            return self.answers.get(timeout=max(timeout_s, 0.0))
        except queue.Empty:
            raise TimeoutError from None

    def ask(self, request: tuple[Any, ...], timeout_s: float) -> Any:
        """The child's answer to ``request``; TimeoutError past ``timeout_s``, ``_GONE``
        when the child died."""
        assert self.process.stdin is not None
        started = time.monotonic()
        try:
            write_frame(self.process.stdin, request)
        except OSError:
            return _GONE
        return self._answer(timeout_s - (time.monotonic() - started))

    def kill(self) -> None:
        if self.owner != os.getpid():  # a forked process's copy: the child is its parent's
            return
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def _stop(holder: list[_Child | None]) -> None:
    child = holder[0]
    holder[0] = None
    if child is not None:
        child.kill()


class BoundedReader:
    """:func:`~evidence_bench.web.page_text.read_page`, each page within the ``timeout_s``
    it is given, in a child process started at the first page. Threads may share it: one
    page is read at a time. ``close`` stops the child (so does the end of the process: the
    child also exits when its stdin closes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._holder: list[_Child | None] = [None]
        self._finalizer = weakref.finalize(self, _stop, self._holder)

    def close(self) -> None:
        with self._lock:
            _stop(self._holder)

    def forget(self) -> None:
        """Drop the child without stopping it (a forked process's copy is its parent's)."""
        self._holder[0] = None
        self._lock = threading.Lock()

    def _child(self) -> _Child:
        child = self._holder[0]
        if child is None or child.process.poll() is not None:
            _stop(self._holder)
            child = self._holder[0] = _Child()
        return child

    def read(
        self,
        body: bytes,
        *,
        url: str,
        content_type: str | None = None,
        timeout_s: float,
        precision: bool = False,
        metadata: bool = True,
    ) -> ExtractedPage | FailureReason:
        """The page read, or why not: ``timeout`` past ``timeout_s`` (the child is killed),
        ``undecodable``, ``no_text`` (also when the child died on the page). The clock
        starts when the child has the page: not while it starts, nor while another page
        holds it."""
        request = (body, url, content_type, precision, metadata)
        with self._lock:
            child = self._child()
            try:
                answer = child.ask(request, timeout_s)
            except TimeoutError:
                _stop(self._holder)
                return FailureReason.TIMEOUT
            if answer is _GONE or not isinstance(answer, ExtractedPage | FailureReason):
                _stop(self._holder)
                return FailureReason.NO_TEXT
            return answer


#: The process's one reader: LiveFetch and ``record`` share its child.
_SHARED = BoundedReader()
os.register_at_fork(after_in_child=_SHARED.forget)

#: :func:`~evidence_bench.web.page_text.read_page` within ``timeout_s`` seconds, by the
#: process's one :class:`BoundedReader`; ``timeout`` past it.
read_page_bounded = _SHARED.read
