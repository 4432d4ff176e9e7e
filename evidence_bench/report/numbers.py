"""How the report writes a number, and its defaults: shared by the page and the context it
renders, without pandas or numpy (a page rendered from its stored analysis needs neither)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["DEFAULT_TRIALS", "MAX_EPISODES", "MINUS", "missing", "number", "signed", "signed_ascii"]

#: Episode details in the page: the best setting's largest losses and gains, split by user.
MAX_EPISODES = 20
#: The fewest randomization trials: :data:`evidence_bench.evaluation.statistics.MIN_TRIALS`
#: (tests/test_stored_analysis.py checks they agree), here so that a report rendered from its
#: stored analysis imports no statistics.
DEFAULT_TRIALS = 5000
#: A true minus sign (U+2212), as typeset, for negative changes.
MINUS = "\u2212"


def missing(value: Any) -> bool:
    """Whether ``value`` is absent: None or NaN."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def number(value: Any, digits: int = 3) -> str:
    """``value`` to ``digits`` decimals; ``–`` where it is missing."""
    return "–" if missing(value) else f"{float(value):.{digits}f}"


def signed(value: Any, digits: int = 3, minus: str = MINUS) -> str:
    """``+0.021`` / ``−0.021`` (``minus``: the negative sign, a true minus unless the terminal's
    ``-``); a change that rounds to zero has no sign; ``–`` where it is missing."""
    if missing(value):
        return "–"
    text = f"{float(value):+.{digits}f}"
    return text[1:] if float(text) == 0 else text.replace("-", minus)


def signed_ascii(value: Any) -> str:
    """:func:`signed` with the ASCII ``-`` of a terminal."""
    return signed(value, minus="-")
