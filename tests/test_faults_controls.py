"""Control characters in web text are stripped where the text enters (issue 31, item 8):
a hostile Brave's titles, snippets and URLs reach no run table, report, export or terminal
with a control character in them (raw ESC bytes once reached ``report.html``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from evidence_bench.__main__ import main as bench_main
from evidence_bench._printable import plain_text
from evidence_bench.evidence import normalize_text
from tests.test_faults_secrets import _run as run_main
from tests.test_faults_secrets import record_run_report

#: C0 but tab and line feed, DEL and C1: what a terminal (or a report's reader) obeys.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

HOSTILE = {
    "esc-csi": "\x1b[2J\x1b[1A\x1b[2Kspoofed",
    "osc8-link": "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07",
    "c1-csi": "\x9b31m red",
    "del-nul-bel": "a\x7fb\x00c\x07d",
    "entity-esc": "&#27;[2J &#x9b;31m",  # an entity that decodes to a control character
}


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_entering_text_has_no_control_character(text: str) -> None:
    assert not CONTROL.search(normalize_text(f"heat {text} transfer"))
    assert plain_text("a\tb\nc\x1bd") == "a\tb\nc d"  # tab and line feed are layout


def _strings(path: Path) -> list[str]:
    if path.suffix == ".parquet":
        table = pq.read_table(path)
        return [
            str(value)
            for column in table.columns
            if str(column.type) in ("string", "large_string")
            for value in column.to_pylist()
            if value is not None
        ]
    if path.suffix in (".gz", ".zst"):
        return []  # the stored analysis: numbers, checked by what reads it
    text = path.read_bytes().decode("utf-8", "replace")
    if path.suffix in (".json", ".jsonl"):  # a JSON escape (\\u001b) is the character too
        lines = text.splitlines() if path.suffix == ".jsonl" else [text]
        return [
            text,
            *(s for line in lines if line.strip() for s in _json_strings(json.loads(line))),
        ]
    return [text]


def _json_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_json_strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in _json_strings(item)]
    return []


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_no_control_character_reaches_a_run_report_or_export(
    text: str,
    tiny_collection: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    def hostile(result: dict[str, Any]) -> None:
        result["title"] += f" {text}"
        result["description"] += f" heat {text} flow"
        result["url"] += "#" + text  # a fragment: the judged document still matches

    run_dir, out, err = record_run_report(hostile, tiny_collection, tmp_path, monkeypatch, capfd)
    assert not CONTROL.search(out + err)
    argv = ["export", str(run_dir), "--format", "csv", "--out", str(tmp_path / "csv")]
    status, out, err = run_main(bench_main, argv, capfd)
    assert status == 0, err
    assert not CONTROL.search(out + err)
    checked = 0
    for path in [*run_dir.rglob("*"), *(tmp_path / "csv").rglob("*")]:
        if path.is_file():
            for value in _strings(path):
                assert not CONTROL.search(value.replace("\r\n", "\n")), path
            checked += 1
    assert checked >= 4
    report = (run_dir / "report.html").read_text()
    assert "\x1b" not in report and "\x9b" not in report
