"""Web text made safe to print on a terminal, and kept free of control characters.

A terminal obeys the control characters of what it prints (ESC, CSI, OSC 8), so the
command lines print web text through :func:`printable` and their JSON through
:func:`json_text`, both redacting the API key; :func:`plain_text` is applied where web
text enters, so no control character reaches a run table, report, cache or JSON.
"""

from __future__ import annotations

import json
from typing import Any

from evidence_bench._secrets import redact, redact_json

__all__ = ["json_text", "plain_text", "printable"]

#: C0 (but tab and line feed, which the listings lay out with), DEL and C1, each as "?"
#: (as GNU ls shows them).
_CONTROLS = str.maketrans(
    {code: "?" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0)) if code not in (0x09, 0x0A)}
)


#: The same characters, each as a space: where web text enters, a word boundary is kept
#: (the tokenizer splits at a control character as at a space) and no byte is kept.
_CONTROLS_AS_SPACE = str.maketrans(dict.fromkeys(_CONTROLS, " "))


def plain_text(text: str) -> str:
    """``text`` with every control character but tab and line feed as a space."""
    return text.translate(_CONTROLS_AS_SPACE)


def printable(text: str) -> str:
    """``text`` with every control character but tab and line feed shown as ``?``, and
    the API key redacted."""
    return redact(text.translate(_CONTROLS))


#: DEL and C1 as JSON escapes (``\\u009b``): the same string to a JSON reader.
_JSON_CONTROLS = str.maketrans({code: f"\\u{code:04x}" for code in (0x7F, *range(0x80, 0xA0))})


def json_text(value: Any) -> str:
    """``value`` as indented JSON, non-ASCII text as it is, no control character raw, the
    API key redacted."""
    text = json.dumps(redact_json(value), indent=2, ensure_ascii=False)
    return redact(text.translate(_JSON_CONTROLS))
