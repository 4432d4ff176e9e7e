"""What every command shares: its one-line error and its ``--help`` before its imports."""

from __future__ import annotations

import sys
from typing import NoReturn

__all__ = ["PROG", "asks_help", "fail"]

#: How the usage texts name the harness (the ``evidence-bench`` console script is the same).
PROG = "python -m evidence_bench"


def fail(message: str, code: int = 1) -> NoReturn:
    """``evidence_bench: MESSAGE`` on stderr, one line, and exit ``code`` (1; 2 for usage)."""
    from evidence_bench._printable import printable  # (a message can quote the web's text)

    print(printable(f"evidence_bench: {message}"), file=sys.stderr)
    raise SystemExit(code)


def asks_help(argv: list[str], usage: str) -> None:
    """Print ``usage`` and exit 0 when ``argv`` is ``-h`` or ``--help``: before the command
    imports what it needs to work."""
    if argv in (["-h"], ["--help"]):
        print(usage)
        raise SystemExit(0)
