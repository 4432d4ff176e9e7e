"""Checks of the numbers an engine part is built with, shared so every part says the
same thing about the same mistake."""

from __future__ import annotations

import math

from evidence_bench.errors import ConfigurationError

__all__ = ["require_count", "require_weights"]


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
