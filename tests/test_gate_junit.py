"""``check --junit``: one testcase per gated cell; a FAIL carries expected, actual, delta
and the queries that dropped most."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from evidence_bench.gate._compare import Check, Role
from evidence_bench.gate._junit import write_junit


def _check(actual: float, *, role: Role = Role.GATED, stage: str = "expand") -> Check:
    return Check(
        "c00", "oracle", 1, stage, "residual", "nDCG@10", 0.5, actual, 0.0001, 40, 40,
        role=role, moved=(("q7", 0.9, 0.2),) if actual < 0.5 else (),
    )  # fmt: skip


def test_gated_cells_are_testcases_and_a_fail_says_what_dropped(tmp_path: Path) -> None:
    path = tmp_path / "gate.xml"
    checks = [
        _check(0.25),
        _check(0.5, stage="rerank"),
        _check(0.1, role=Role.REPORTED, stage="control"),
    ]
    write_junit(path, checks, suite="baselines/ci.yaml")
    suite = ET.parse(path).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == (
        "baselines/ci.yaml", "2", "1",
    )  # fmt: skip
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [
        ("c00.oracle", "round 1 expand residual nDCG@10"),
        ("c00.oracle", "round 1 rerank residual nDCG@10"),
    ]
    failure = cases[0].find("failure")
    assert failure is not None and cases[1].find("failure") is None
    assert failure.get("message") == (
        "nDCG@10 0.2500, baseline 0.5000 (delta -0.2500, tolerance 0.0001)"
    )
    assert failure.text is not None
    assert "expected: 0.500000 (n=40)" in failure.text
    assert "actual: 0.250000 (n=40)" in failure.text
    assert "delta: -0.250000" in failure.text
    assert "query q7: 0.9000 -> 0.2000 (-0.7000)" in failure.text
    assert list(tmp_path.iterdir()) == [path]  # written whole, no temporary file left
