"""``check --junit FILE``: the gate's verdict as JUnit XML, which CI systems display.

One testcase per gated cell (``classname`` the config and user, ``name`` the round, stage,
mode and measure); a FAIL is a ``<failure>`` carrying the expected and actual means, their
delta and the queries that dropped most. Written whole or not at all (``_atomic``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from xml.etree import ElementTree as ET

from evidence_bench._atomic import write_atomic
from evidence_bench.gate._compare import Check, Role

__all__ = ["junit_xml", "write_junit"]


def _failure(check: Check) -> ET.Element:
    element = ET.Element(
        "failure",
        message=(
            f"{check.measure} {check.actual:.4f}, baseline {check.expected:.4f} "
            f"(delta {check.delta:+.4f}, tolerance {check.tolerance:g})"
        ),
        type="regression",
    )
    lines = [
        f"expected: {check.expected:.6f} (n={check.n_expected})",
        f"actual: {check.actual:.6f} (n={check.n_actual})",
        f"delta: {check.delta:+.6f}",
    ]
    if check.lost or check.gained:
        lines.append(f"other queries: lost {list(check.lost)}, gained {list(check.gained)}")
    for query_id, before, after in check.moved:
        lines.append(f"query {query_id}: {before:.4f} -> {after:.4f} ({after - before:+.4f})")
    element.text = "\n".join(lines) + "\n"
    return element


def junit_xml(checks: Sequence[Check], *, suite: str) -> bytes:
    """The JUnit XML document of ``checks``' gated cells."""
    gated = [c for c in checks if c.role is Role.GATED]
    failures = sum(c.status == "FAIL" for c in gated)
    root = ET.Element("testsuites", name="evidence_bench check")
    suite_element = ET.SubElement(
        root, "testsuite", name=suite, tests=str(len(gated)), failures=str(failures), errors="0"
    )
    for check in gated:
        case = ET.SubElement(
            suite_element,
            "testcase",
            classname=f"{check.config_id}.{check.policy}",
            name=f"round {check.round} {check.stage} {check.eval_mode} {check.measure}",
        )
        if check.status == "FAIL":
            case.append(_failure(check))
    ET.indent(root)
    document: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return document + b"\n"


def write_junit(path: Path, checks: Sequence[Check], *, suite: str) -> None:
    """Write :func:`junit_xml` to ``path`` atomically."""
    write_atomic(path, junit_xml(checks, suite=suite))
