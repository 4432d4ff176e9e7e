"""Argument types the command lines share: a number within bounds."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

__all__ = ["count_between", "number_in"]

N = TypeVar("N", int, float)


def number_in(
    kind: Callable[[str], N],
    low: float,
    high: float | None = None,
    *,
    above: bool = False,
    unit: str = "",
) -> Callable[[str], N]:
    """An argparse ``type``: ``kind(value)`` (``int`` or ``float``) from ``low`` to ``high``,
    or with no ``high`` at least ``low`` (greater than ``low`` when ``above``); else
    argparse's usage error naming the value (``must be from 1 to 50, got 0``). NaN is in
    no range. ``unit`` names what is counted in the message (``must be > 0 days``)."""
    what = ("an integer" if kind is int else "a number") + (f" of {unit}" if unit else "")
    bound = f"from {low} to {high}" if high is not None else f"{'>' if above else '>='} {low}"
    bound += f" {unit}" if unit else ""

    def parse(value: str) -> N:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {value!r}") from None
        inside = number > low if above and high is None else number >= low
        if not (inside and (high is None or number <= high)):
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return number

    parse.__name__ = f"number {bound}"  # argparse names a type by it
    return parse


def count_between(low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer from ``low`` to ``high`` (:func:`number_in`)."""
    return number_in(int, low, high)
