"""The command lines' range types (evidence_bench/_argtypes.py)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest

from evidence_bench._argtypes import count_between, number_in

SHARE = number_in(float, 0, 1)
DAYS = number_in(float, 0, above=True, unit="days")
HOURS = number_in(float, 0, unit="hours")


@pytest.mark.parametrize(
    ("parse", "value", "expected"),
    [
        (count_between(1, 50), "1", 1),
        (count_between(1, 50), "50", 50),
        (SHARE, "0", 0.0),
        (SHARE, "1", 1.0),
        (DAYS, "0.5", 0.5),
        (HOURS, "0", 0.0),
        (HOURS, "inf", float("inf")),
    ],
)
def test_a_value_in_range_is_parsed(parse: Callable[[str], Any], value: str, expected: Any) -> None:
    assert parse(value) == expected
    assert type(parse(value)) is type(expected)


@pytest.mark.parametrize(
    ("parse", "value", "message"),
    [
        (count_between(1, 50), "0", "must be from 1 to 50, got 0"),
        (count_between(1, 50), "51", "must be from 1 to 50, got 51"),
        (count_between(1, 50), "2.5", "not an integer: '2.5'"),
        (SHARE, "1.5", "must be from 0 to 1, got 1.5"),
        (SHARE, "nan", "must be from 0 to 1, got nan"),
        (SHARE, "half", "not a number: 'half'"),
        (DAYS, "0", "must be > 0 days, got 0"),
        (DAYS, "x", "not a number of days: 'x'"),
        (HOURS, "-1", "must be >= 0 hours, got -1"),
        (HOURS, "nan", "must be >= 0 hours, got nan"),
    ],
)
def test_a_value_out_of_range_is_a_usage_error_naming_it(
    parse: Callable[[str], Any], value: str, message: str
) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        parse(value)
    assert str(caught.value) == message
