"""The one JSON-lines reader (runs/data.py), read by pools, shards and run directories:
records in order with their line numbers, blank lines skipped, and a one-line DataError
naming the file and line for a missing file, bad JSON or a line that is not an object."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evidence_bench.errors import DataError
from evidence_bench.experiment.pool import PoolItem, read_pool
from evidence_bench.runs.data import numbered_jsonl, read_jsonl


def test_records_keep_their_line_numbers_past_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    # U+2028 is a line break to str.splitlines, not inside a JSON string on one line
    path.write_text('{"a": 1}\n\n   \n{"b": "x\u2028y"}\r\n', "utf-8")
    assert list(numbered_jsonl(path)) == [(1, {"a": 1}), (4, {"b": "x\u2028y"})]
    assert list(read_jsonl(path)) == [{"a": 1}, {"b": "x\u2028y"}]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1}\n{not json\n', "x.jsonl:2: invalid JSON (Expecting property name"),
        ('\n["a"]\n', "x.jsonl:2: expected a JSON object"),
        (b"\xff\xfe{}".decode("latin-1"), "x.jsonl: cannot be read"),
    ],
)
def test_a_bad_file_names_itself_and_its_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(text, "latin-1" if "cannot" in message else "utf-8")
    with pytest.raises(DataError, match=re.escape(message)) as caught:
        list(read_jsonl(path))
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_an_error_for_every_reader(tmp_path: Path) -> None:
    missing = tmp_path / "none.jsonl"
    for read in (read_jsonl, read_pool):
        with pytest.raises(DataError, match=re.escape(f"{missing}: file not found")):
            list(read(missing))


def test_a_pool_row_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "pool.jsonl"
    row = '{"query_id": "1", "query": "q", "doc_id": "d", "url": "u", "title": "t", '
    path.write_text(row + '"snippet": "s"}\n\n' + row + '"snippet": 3}\n', "utf-8")
    with pytest.raises(DataError, match=re.escape(f"{path}:3: missing or not text: snippet")):
        read_pool(path)
    path.write_text(row + '"snippet": "s"}\n', "utf-8")
    assert read_pool(path) == [PoolItem("1", "q", "d", "u", "t", "s", None)]
