"""How the report writes a p-value: a cell shows ``<0.001``, a sentence says ``p < 0.001``.

The page and the terminal table share one formatter (evidence_bench/report/numbers.py);
a sentence never reads ``p = <0.001``.
"""

from __future__ import annotations

import html
import math
import re
from pathlib import Path

import pytest
from report_fixtures import write_run_dir

from evidence_bench.report import render_report
from evidence_bench.report.numbers import p_is, p_value

TEMPLATES = Path(__file__).resolve().parents[1] / "evidence_bench" / "report" / "templates"


@pytest.mark.parametrize(
    ("p", "cell", "stated"),
    [
        (0.0123, "0.012", "= 0.012"),
        (0.5, "0.500", "= 0.500"),
        (1.0, "1.000", "= 1.000"),
        (0.001, "0.001", "= 0.001"),  # the floor itself is a number
        (0.0009999, "<0.001", "< 0.001"),
        (1 / 5001, "<0.001", "< 0.001"),  # the least p of 5,000 randomization trials
        (0.0, "<0.001", "< 0.001"),
        (None, "–", "= –"),
        (math.nan, "–", "= –"),
    ],
)
def test_a_p_value_in_a_cell_and_in_a_sentence(p: float | None, cell: str, stated: str) -> None:
    assert p_value(p) == cell
    assert p_is(p) == stated


def test_no_template_writes_p_equals_a_cell() -> None:
    """A sentence names its p and states it with ``p_is``, which writes the sign itself."""
    written = {
        path.name: re.findall(r"p = \{\{[^}]*\}\}", path.read_text("utf-8"))
        for path in sorted(TEMPLATES.glob("*.j2"))
    }
    assert {name: found for name, found in written.items() if found} == {}


def test_a_report_says_holm_p_below_the_floor_as_less_than(tmp_path: Path) -> None:
    # 40 queries, one configuration, one user: its gain over before is significant beyond
    # what 5,000 randomization trials can tell apart from 0.001
    run_dir = write_run_dir(tmp_path, n_queries=40, grid={"beta": [0.75]}, policies=("oracle",))
    text = html.unescape(re.sub(r"<[^>]+>", "", render_report(run_dir, trials=5000).read_text()))
    assert "Holm p < 0.001" in text
    assert re.findall(r"p = <", text) == []
