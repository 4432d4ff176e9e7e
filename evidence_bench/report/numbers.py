"""How the report writes a number, and its defaults: shared by the page and the context it
renders, without pandas or numpy (a page rendered from its stored analysis needs neither)."""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "DEFAULT_TRIALS",
    "MAX_EPISODES",
    "MINUS",
    "P_FLOOR",
    "missing",
    "number",
    "p_is",
    "p_value",
    "signed",
    "signed_ascii",
]

#: Episode details in the page: the best setting's largest losses and gains, split by user.
MAX_EPISODES = 20
#: The fewest randomization trials: :data:`evidence_bench.evaluation.statistics.MIN_TRIALS`
#: (tests/test_stored_analysis.py checks they agree), here so that a report rendered from its
#: stored analysis imports no statistics.
DEFAULT_TRIALS = 5000
#: A true minus sign (U+2212), as typeset, for negative changes.
MINUS = "\u2212"
#: The smallest p-value written as a number; one below it is written as below it.
P_FLOOR = 0.001


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


def p_value(value: Any) -> str:
    """A p-value as a table cell shows it: ``0.012`` (three decimals), ``<0.001`` below
    :data:`P_FLOOR`, ``–`` where there is none."""
    if missing(value):
        return "–"
    return f"<{P_FLOOR}" if float(value) < P_FLOOR else f"{float(value):.3f}"


def p_is(value: Any) -> str:
    """A p-value as a sentence states it after its name ("Holm p ..."): ``= 0.012``,
    ``< 0.001`` below :data:`P_FLOOR` (never ``= <0.001``), ``= –`` where there is none."""
    if not missing(value) and float(value) < P_FLOOR:
        return f"< {P_FLOOR}"
    return f"= {p_value(value)}"
