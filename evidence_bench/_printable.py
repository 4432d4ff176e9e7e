"""Web text made safe to print on a terminal.

A title, snippet, URL or page quote is the web's text, and a terminal obeys the control
characters in what it prints: ESC and CSI sequences move the cursor, clear the screen or
rewrite the lines above, and an OSC 8 sequence hides a link behind other text. The HTML
report escapes such text (:mod:`evidence_bench.report`); the command lines print it through
:func:`printable`. JSON output needs nothing: ``json.dumps`` escapes every control character.
"""

from __future__ import annotations

__all__ = ["printable"]

#: C0 (but tab and line feed, which the listings lay out with), DEL and C1, each as "?"
#: (as GNU ls shows them).
_CONTROLS = str.maketrans(
    {code: "?" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if code not in (0x09, 0x0A)}
)


def printable(text: str) -> str:
    """``text`` with every control character but tab and line feed shown as ``?``."""
    return text.translate(_CONTROLS)
