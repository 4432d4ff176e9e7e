"""TREC run and qrels files: round trips, validation with file:line, and trec_eval's view."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import pytest
import pytrec_eval
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evidence_bench.errors import DataError, WriteError
from evidence_bench.evaluation.measures import evaluate, parse_measure, prepare
from evidence_bench.evaluation.trec import read_qrels, read_run, write_qrels, write_run

MEASURES = [parse_measure(name) for name in ("nDCG@10", "nDCG@5", "P@5", "R@20", "AP", "RR")]


@pytest.fixture
def tiny_run() -> dict[str, list[str]]:
    return {
        "q1": ["https://a.example/x?id=1", "https://b.example/", "https://c.example/p"],
        "q2": ["https://c.example/p", "https://d.example/"],
        "q3": [],
    }


@pytest.fixture
def tiny_qrels() -> dict[str, dict[str, int]]:
    return {
        "q1": {"https://a.example/x?id=1": 0, "https://c.example/p": 2, "https://z.example/": 1},
        "q2": {"https://d.example/": 3, "https://e.example/": 0},
        "q3": {"https://a.example/x?id=1": 1},
    }


def test_run_file_layout(tmp_path: Path, tiny_run: dict[str, list[str]]) -> None:
    path = tmp_path / "run.txt"
    write_run(path, tiny_run, "rocchio")
    assert path.read_text(encoding="utf-8").splitlines() == [
        "q1 Q0 https://a.example/x?id=1 1 3.0 rocchio",
        "q1 Q0 https://b.example/ 2 2.0 rocchio",
        "q1 Q0 https://c.example/p 3 1.0 rocchio",
        "q2 Q0 https://c.example/p 1 2.0 rocchio",
        "q2 Q0 https://d.example/ 2 1.0 rocchio",
    ]


def test_run_round_trip_keeps_order(tmp_path: Path, tiny_run: dict[str, list[str]]) -> None:
    path = tmp_path / "run.txt"
    write_run(path, tiny_run, "baseline")
    run = read_run(path)
    assert set(run) == {"q1", "q2"}  # a query with an empty ranking writes no line
    for query_id, scores in run.items():
        values = list(scores.values())
        assert all(high > low for high, low in itertools.pairwise(values))
        assert sorted(scores, key=scores.__getitem__, reverse=True) == tiny_run[query_id]


def test_qrels_round_trip(tmp_path: Path, tiny_qrels: dict[str, dict[str, int]]) -> None:
    path = tmp_path / "qrels.txt"
    write_qrels(path, tiny_qrels)
    assert path.read_text(encoding="utf-8").splitlines()[0] == "q1 0 https://a.example/x?id=1 0"
    assert read_qrels(path) == tiny_qrels


def test_pytrec_eval_on_written_files_equals_evaluate(
    tmp_path: Path, tiny_run: dict[str, list[str]], tiny_qrels: dict[str, dict[str, int]]
) -> None:
    run_path, qrels_path = tmp_path / "run.txt", tmp_path / "qrels.txt"
    write_run(run_path, tiny_run, "t")
    write_qrels(qrels_path, tiny_qrels)
    with qrels_path.open() as qrels_file, run_path.open() as run_file:
        qrels = pytrec_eval.parse_qrel(qrels_file)
        run = pytrec_eval.parse_run(run_file)
    names = {measure.trec_eval_name for measure in MEASURES}
    expected = pytrec_eval.RelevanceEvaluator(qrels, names).evaluate(run)
    for query_id in run:
        got = evaluate(tiny_run[query_id], prepare(tiny_qrels[query_id]), MEASURES)
        want = {str(m): expected[query_id][m.trec_eval_name] for m in MEASURES}
        assert got == pytest.approx(want, abs=1e-12)
    assert any(value > 0 for value in expected["q1"].values())  # the check is not all zeros


def test_many_documents_stay_exact(tmp_path: Path) -> None:
    ranking = [f"https://example.org/{i}" for i in range(5000)]
    path = tmp_path / "run.txt"
    write_run(path, {"q": ranking}, "t")
    scores = read_run(path)["q"]
    assert sorted(scores, key=scores.__getitem__, reverse=True) == ranking


TOKEN = st.text(
    st.characters(blacklist_categories=("Cs", "Cc", "Zs", "Zl", "Zp")), min_size=1, max_size=12
).filter(lambda text: text.split() == [text])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    run=st.dictionaries(TOKEN, st.lists(TOKEN, unique=True, min_size=1, max_size=8), max_size=5),
    qrels=st.dictionaries(TOKEN, st.dictionaries(TOKEN, st.integers(-1, 4), min_size=1)),
)
def test_property_round_trip(
    tmp_path: Path, run: dict[str, list[str]], qrels: dict[str, dict[str, int]]
) -> None:
    write_run(tmp_path / "run", run, "tag")
    read = read_run(tmp_path / "run")
    assert {q: sorted(s, key=s.__getitem__, reverse=True) for q, s in read.items()} == run
    write_qrels(tmp_path / "qrels", qrels)
    assert read_qrels(tmp_path / "qrels") == qrels


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("q1 Q0 d1 1 2.0\n", 1, "expected 6 fields (query_id Q0 doc_id rank score tag), got 5"),
        ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 x 1.0 t\n", 2, "rank must be an integer, got 'x'"),
        ("q1 Q0 d1 1 high t\n", 1, "score must be a number, got 'high'"),
        ("q1 Q0 d1 1 nan t\n", 1, "score must be finite"),
        ("\nq1 Q0 d1 1 2.0 t\n\nq1 Q0 d1 2 1.0 t\n", 4, "doc_id 'd1' appears twice for query 'q1'"),
        ("q1 Q0 https://a.example/ a b 1 2.0 t\n", 1, "expected 6 fields"),
    ],
)
def test_bad_run_lines_name_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "bad.run"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_run(path)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("q1 0 d1\n", 1, "expected 4 fields (query_id 0 doc_id relevance), got 3"),
        ("q1 0 d1 1\nq1 0 d2 1.5\n", 2, "relevance must be an integer, got '1.5'"),
        ("q1 0 d1 1\nq2 0 d1 1\nq1 0 d1 0\n", 3, "doc_id 'd1' judged twice for query 'q1'"),
    ],
)
def test_bad_qrels_lines_name_file_and_line(
    tmp_path: Path, text: str, line: int, message: str
) -> None:
    path = tmp_path / "bad.qrels"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DataError) as info:
        read_qrels(path)
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert message in str(info.value)


def test_missing_file_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="cannot read"):
        read_run(tmp_path / "absent.run")


@pytest.mark.parametrize(
    ("run", "tag", "message"),
    [
        ({"q1": ["https://a.example/ b"]}, "t", "doc_id of query 'q1'"),
        ({"q1": ["a\tb"]}, "t", "holds whitespace"),
        ({"q 1": ["a"]}, "t", "query_id 'q 1'"),
        ({"q1": [""]}, "t", "is empty"),
        ({"q1": ["a"]}, "my run", "run tag 'my run'"),
        ({"q1": ["a", "b", "a"]}, "t", "a doc_id appears twice"),
    ],
)
def test_write_run_refuses_what_cannot_be_read_back(
    tmp_path: Path, run: dict[str, list[str]], tag: str, message: str
) -> None:
    with pytest.raises(DataError, match=message):
        write_run(tmp_path / "run.txt", run, tag)


def test_write_qrels_refuses_whitespace(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="holds whitespace"):
        write_qrels(tmp_path / "qrels.txt", {"q1": {"a b": 1}})


def test_failed_write_leaves_previous_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    write_run(path, {"q1": ["a", "b"]}, "old")
    before = path.read_text(encoding="utf-8")
    with pytest.raises(DataError):  # fails at q2, after q1's lines
        write_run(path, {"q1": ["c"], "q2": ["bad doc"]}, "new")
    assert path.read_text(encoding="utf-8") == before
    assert os.listdir(tmp_path) == ["run.txt"]


def test_writer_creates_parent_folders(tmp_path: Path) -> None:
    path = tmp_path / "runs" / "exp1" / "run.txt"
    write_run(path, {"q1": ["a"]}, "t")
    assert read_run(path) == {"q1": {"a": 1.0}}


def test_a_folder_that_cannot_be_made_is_one_line_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("a file where the folder would go\n", encoding="utf-8")
    path = tmp_path / "runs" / "exp1" / "run.txt"
    with pytest.raises(WriteError, match=f"could not write {path}: "):
        write_run(path, {"q1": ["a"]}, "t")
