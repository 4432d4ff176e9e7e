"""Argument types the command lines share: a count within bounds."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["count_between"]


def count_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low`` to ``high``, else argparse's usage error
    naming the value (``must be from 1 to 50, got 0``)."""

    def count(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
        if not low <= number <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}, got {number}")
        return number

    count.__name__ = f"count from {low} to {high}"  # argparse names a type by it
    return count
