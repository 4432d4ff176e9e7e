"""The ``#:`` doc comments of a class's fields, as Sphinx's autodoc reads them: the comment
lines right above a field, each without its ``#:``, joined by spaces.

One reader for ``--help``'s config keys (``commands/_help.py``) and the manual's
configuration reference (``docs/_ext/configref.py``).
"""

from __future__ import annotations

import inspect
import re

__all__ = ["field_comments"]

_FIELD = re.compile(r"^(\w+)\s*:")


def field_comments(cls: type) -> dict[str, str]:
    """``field -> its #: comment`` for each annotated field of ``cls`` (read from its
    source) that has one above it."""
    comments: dict[str, str] = {}
    pending: list[str] = []
    for line in inspect.getsource(cls).splitlines():
        text = line.strip()
        if text.startswith("#:"):
            pending.append(text[2:].strip())
            continue
        field = _FIELD.match(text)
        if field and pending:
            comments[field.group(1)] = " ".join(pending).strip()
        pending = []
    return comments
