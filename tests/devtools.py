"""Headless Chromium driven over the DevTools protocol, through a pipe (no socket, no package).

``--remote-debugging-pipe`` makes Chromium read protocol commands from its fd 3 and write
answers and events to its fd 4, each message JSON ended by a NUL byte
(chromedevtools.github.io/devtools-protocol). A pipe needs no websocket client and opens
no port, so nothing but the page under test listens.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.chromium import FLAGS as CHROMIUM_FLAGS

__all__ = ["FLAGS", "Browser"]

#: Chromium's offline flags (benchmarks/chromium.py, which the benchmarks start it with
#: too), its log on stderr.
FLAGS = (*CHROMIUM_FLAGS, "--enable-logging=stderr", "--v=0")


def _above_4(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """One Chromium showing ``url`` in one page; :meth:`send` runs a command in that page."""

    def __init__(self, chromium: str, profile: Path, url: str) -> None:
        commands, self._to_chromium = os.pipe()
        self._from_chromium, answers = os.pipe()
        # above 4, so that neither dup2 below overwrites the other's source
        commands, answers = (_above_4(fd) for fd in (commands, answers))

        def as_fds_3_and_4() -> None:  # in the child, before exec
            os.dup2(commands, 3)
            os.dup2(answers, 4)

        self.process = subprocess.Popen(
            [chromium, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe", url],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=(3, 4),
            preexec_fn=as_fds_3_and_4,
        )
        os.close(commands)
        os.close(answers)
        self._buffer = b""
        self._next_id = 0
        self._session: str | None = None
        page = next(
            target
            for target in self._call("Target.getTargets")["targetInfos"]
            if target["type"] == "page"
        )
        attached = self._call("Target.attachToTarget", targetId=page["targetId"], flatten=True)
        self._session = attached["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")

    def _message(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_chromium, 65536)
            if not chunk:
                raise RuntimeError("Chromium closed its DevTools pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(message))

    def _call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self._session is not None:
            command["sessionId"] = self._session
        os.write(self._to_chromium, json.dumps(command).encode() + b"\0")
        while True:
            message = self._message()
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Run a protocol command in the page; its result."""
        return self._call(method, **params)

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def press(self, key: str) -> None:
        """A key pressed and released, as the keyboard sends it (``event.key`` is ``key``)."""
        self.send("Input.dispatchKeyEvent", type="keyDown", key=key, text=key)
        self.send("Input.dispatchKeyEvent", type="keyUp", key=key)

    def wait_for(self, expression: str, check: Callable[[Any], bool], timeout: float = 20) -> Any:
        """Poll ``expression`` until ``check`` holds of its value; the value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if check(value):
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{expression} is still {value!r} after {timeout} s")
            time.sleep(0.05)

    def close(self) -> None:
        self._session = None  # a browser's command, not the page's
        try:
            self._call("Browser.close")
        except (RuntimeError, OSError):
            pass
        finally:
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            os.close(self._to_chromium)
            os.close(self._from_chromium)
