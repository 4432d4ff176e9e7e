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


def _page_server(text: str) -> Any:
    def answer(request: Any) -> tuple[int, dict[str, str], bytes]:
        port = request.server.server_address[1]
        if request.path.startswith("/res/v1/web/search"):
            url = f"http://127.0.0.1:{port}/page"
            web = {"results": [{"title": "Heat", "url": url, "description": "Heat flow"}]}
            body = json.dumps({"type": "search", "web": web}).encode()
            return 200, {"Content-Type": "application/json"}, body
        page = (
            f"<html><head><title>Heat {text} transfer</title></head><body><article>"
            f"<p>Heat transfer in a boundary layer {text} is measured in this study.</p>"
            "<p>Heat transfer across the boundary layer depends on the flow.</p>"
            "</article></body></html>"
        )
        return 200, {"Content-Type": "text/html; charset=utf-8"}, page.encode()

    return answer


@pytest.mark.parametrize("text", HOSTILE.values(), ids=HOSTILE.keys())
def test_no_control_character_of_a_page_reaches_livefetch_json_or_its_cache(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    from evidence_bench.livefetch._cli import main as livefetch_main
    from tests.fault_fixtures import serve_bytes

    cache = tmp_path / "lf.sqlite"
    monkeypatch.setenv("BRAVE_SEARCH_API_KEY", "k" * 24)
    with serve_bytes(_page_server(text)) as base_url:
        monkeypatch.setenv("BRAVE_SEARCH_BASE_URL", base_url)
        argv = ["heat transfer", "--mode", "web", "--format", "json", "--allow-private"]
        argv += ["--freshness-days", "none", "--cache", str(cache)]
        status, out, err = run_main(livefetch_main, argv, capfd)
    assert status == 0, err
    answer = json.loads(out)
    # a packet without the controls, or the page refused as binary (undecodable)
    assert [p["title"][:4] for p in answer["packets"]] == ["Heat"] or [
        f["reason"] for f in answer["failures"]
    ] == ["undecodable"], out
    for value in _json_strings(json.loads(out)):
        assert not CONTROL.search(value), value
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT url, title, text FROM docs").fetchall()
    assert len(rows) == len(answer["packets"])
    for row in rows:
        for value in row:
            assert not CONTROL.search(value), value
