"""The numbers an engine part is built with: checks shared so every part says the same
thing about the same mistake, and the canonical form of weights only whose ratios matter.

Each part's ``effective_params()`` (the rankers, the refiners, boost) returns the settings
that decide its output, with weights it cannot tell apart folded into one form, so a run
can find the configs that must give the same results and run each once
(:func:`evidence_bench.experiment.components.effective_key`).
"""

from __future__ import annotations

import math
from collections.abc import Hashable

from evidence_bench.errors import ConfigurationError

__all__ = [
    "RATIO_DIGITS", "TIE_DIGITS", "part_key", "require_count", "require_weights", "scale_free",
]  # fmt: skip

#: Scores and weights are rounded to this many decimals before they are ordered, so values
#: equal in exact arithmetic but apart in the last bits (summation order) still tie, and the
#: tie falls back to a fixed order (the candidates', or the alphabet).
TIE_DIGITS = 12


def require_weights(owner: object, *names: str) -> None:
    """Each named attribute of ``owner`` is a finite number >= 0 (not a bool)."""
    for name in names:
        value = getattr(owner, name)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < 0
        ):
            raise ConfigurationError(f"{name} must be a finite number >= 0, got {value!r}")


def require_count(name: str, value: object) -> None:
    """``value`` is a whole number >= 0 (not a bool)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an integer, got {value!r}")
    if value < 0:
        raise ConfigurationError(f"{name} must be >= 0, got {value}")


#: Significant digits a canonical weight keeps, so ``0.45 / 3`` and ``0.15`` are one value
#: (float division leaves ``0.15000000000000002``); far more than any config writes.
RATIO_DIGITS = 12


def scale_free(*weights: float) -> tuple[float, ...]:
    """``weights`` divided by the first of them that is not 0, or all zeros if none is.

    The canonical point of the ray {c·w : c > 0}: a part whose output is invariant to a
    positive common factor on ``weights`` gives the same output for every point of the ray,
    and each ray has exactly one such point, so equal canonical forms mean equal outputs.
    ``scale_free(2, 1.5, 0.3) == scale_free(1, 0.75, 0.15) == (1.0, 0.75, 0.15)``;
    ``scale_free(0, 2, 1) == (0.0, 1.0, 0.5)``.
    """
    unit = next((w for w in weights if w != 0), None)
    if unit is None:
        return tuple(0.0 for _ in weights)
    return tuple(float(f"{w / unit:.{RATIO_DIGITS}g}") for w in weights)


def part_key(part: object) -> Hashable:
    """A hashable key for an engine part: parts with equal keys give the same output.

    The part's type and its ``effective_params()``; a part without that method is keyed by
    itself where it is hashable (a frozen dataclass compares by value), else it equals no
    other part.
    """
    kind = f"{type(part).__module__}.{type(part).__qualname__}"
    effective = getattr(part, "effective_params", None)
    key: Hashable = (
        (kind, tuple(sorted(effective().items(), key=lambda item: str(item[0]))))
        if callable(effective)
        else (kind, part)
    )
    try:
        hash(key)
    except TypeError:
        return (kind, object())
    return key
