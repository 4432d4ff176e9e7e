"""Loading BEIR-layout collections: counts, validation messages, qrels formats, URLs."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidence_bench.collections.beir import Collection, Corpus, Document, Query, load_collection
from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.evidence import canonical_url

COLLECTIONS = Path(__file__).resolve().parents[1] / "collections"

CORPUS = (
    '{"_id": "d1", "title": "Wing flutter", "text": "flutter of a swept wing"}\n'
    '{"_id": "d2", "title": "Heat", "text": "heat transfer in slabs"}\n'
)
QUERIES = '{"_id": "q1", "text": "wing flutter"}\n{"_id": "q2", "text": "heat"}\n'
HEADER = "query-id\tcorpus-id\tscore\n"
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t1\n"


def write_collection(
    root: Path, corpus: str = CORPUS, queries: str = QUERIES, qrels: str | None = QRELS
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (root / "queries.jsonl").write_text(queries, encoding="utf-8")
    if qrels is not None:
        (root / "qrels.tsv").write_text(qrels, encoding="utf-8")
    return root


# -- the shipped collections match their SOURCE.md ----------------------------------------------


def test_cranfield_counts_match_source_md() -> None:
    collection = load_collection(COLLECTIONS / "cranfield")
    assert collection.name == "cranfield"
    assert len(collection.documents) == 1400
    assert len(collection.queries) == 225
    assert sum(len(docs) for docs in collection.qrels.values()) == 1612
    assert len(collection.judged_query_ids()) == 225
    grades: dict[int, int] = {}
    for docs in collection.qrels.values():
        for grade in docs.values():
            grades[grade] = grades.get(grade, 0) + 1
    assert grades == {1: 363, 2: 734, 3: 387, 4: 128}
    assert collection.dropped_qrels == 0


def test_cacm_counts_match_source_md() -> None:
    collection = load_collection(COLLECTIONS / "cacm")
    assert (len(collection.documents), len(collection.queries)) == (3204, 64)
    assert sum(len(docs) for docs in collection.qrels.values()) == 796
    assert len(collection.judged_query_ids()) == 52
    assert collection.documents["3193"].title == ""  # the quirk SOURCE.md lists


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_shipped_files_match_the_hashes_in_source_md(name: str) -> None:
    root = COLLECTIONS / name
    listed = dict(
        re.findall(r"- `(\S+)` \d+ bytes, `([0-9a-f]{64})`", (root / "SOURCE.md").read_text())
    )
    assert set(listed) == {"corpus.jsonl", "queries.jsonl", "qrels.tsv"}
    for file, digest in listed.items():
        assert hashlib.sha256((root / file).read_bytes()).hexdigest() == digest


def test_first_qrels_row_is_read_with_its_grade() -> None:
    collection = load_collection(COLLECTIONS / "cranfield")
    header, first = (COLLECTIONS / "cranfield" / "qrels.tsv").read_text().splitlines()[:2]
    query_id, doc_id, score = first.split("\t")
    assert header == "query-id\tcorpus-id\tscore"
    assert collection.qrels[query_id][doc_id] == int(score)


def test_loading_cranfield_is_fast() -> None:
    started = time.perf_counter()
    load_collection(COLLECTIONS / "cranfield")
    assert time.perf_counter() - started < 1.0


def test_checksum_is_stable_and_follows_the_bytes(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c")
    first = load_collection(root).checksum
    assert first == load_collection(root).checksum
    concatenated = b"".join(
        (root / f).read_bytes() for f in ("corpus.jsonl", "queries.jsonl", "qrels.tsv")
    )
    assert first == hashlib.sha256(concatenated).hexdigest()  # `cat ... | sha256sum` reproduces it
    write_collection(root, qrels=QRELS.replace("\t2\n", "\t3\n"))
    assert load_collection(root).checksum != first


def test_in_memory_collection_gets_a_content_checksum() -> None:
    def build(text: str) -> Collection:
        return Collection(
            "m", {"d": Document("d", "", text)}, {"q": Query("q", "x")}, {"q": {"d": 1}}
        )

    assert build("a").checksum == build("a").checksum
    assert build("a").checksum != build("b").checksum


def test_repr_is_short() -> None:
    text = repr(load_collection(COLLECTIONS / "cranfield"))
    assert "documents=1400" in text and len(text) < 200


# -- validation: every bad line names file and line ----------------------------------------------

BAD_LINES = [
    ("corpus.jsonl", CORPUS + "{not json\n", "corpus.jsonl:3: invalid JSON"),
    ("corpus.jsonl", '{"title": "t", "text": "x"}\n', "corpus.jsonl:1: missing '_id'"),
    ("corpus.jsonl", '{"_id": "", "text": "x"}\n', "corpus.jsonl:1: '_id' is empty"),
    ("corpus.jsonl", '{"_id": ["d"], "text": "x"}\n', "corpus.jsonl:1: '_id' must be a string"),
    ("corpus.jsonl", '["d1", "t", "x"]\n', "corpus.jsonl:1: expected a JSON object, found list"),
    (
        "corpus.jsonl",
        '{"_id": "d1", "title": 7, "text": "x"}\n',
        "corpus.jsonl:1: 'title' must be a string",
    ),
    (
        "corpus.jsonl",
        CORPUS + '{"_id": "d1", "text": "again"}\n',
        "corpus.jsonl:3: duplicate document id 'd1' (first on line 1)",
    ),
    ("queries.jsonl", '{"_id": "q1"}\n', "queries.jsonl:1: missing 'text'"),
    # nothing to search for: named here, not as "query is empty" in the middle of a run
    ("queries.jsonl", '{"_id": "q1", "text": "  "}\n', "queries.jsonl:1: 'text' is empty"),
    (
        "queries.jsonl",
        QUERIES + '{"_id": "q1", "text": "x"}\n',
        "queries.jsonl:3: duplicate query id 'q1'",
    ),
    (
        "queries.jsonl",
        '{"_id": "q1", "text": "x"}\n\n{"_id": "q2", "text": ',
        "queries.jsonl:3: invalid JSON",
    ),
    ("qrels.tsv", HEADER + "q1\td1\thigh\n", "qrels.tsv:2: score 'high' is not an integer"),
    ("qrels.tsv", HEADER + "q1\td1\t1.5\n", "qrels.tsv:2: score '1.5' is not an integer"),
    ("qrels.tsv", HEADER + "q1\td1\t1\nq2\td2\n", "qrels.tsv:3: expected 3 columns"),
    (
        "qrels.tsv",
        HEADER + "q1\td1\t1\nq1\td1\t2\n",
        "qrels.tsv:3: duplicate judgment for query 'q1' and document 'd1' (first on line 2)",
    ),
    ("qrels.tsv", "q1 0 d1 1\nq2 d2 1\n", "qrels.tsv:2: expected 4 columns (TREC"),
    ("qrels.tsv", "q1\td1\n", "qrels.tsv:1: expected 3 columns"),
    ("qrels.tsv", HEADER + "q9\td1\t1\n", "qrels.tsv:2: unknown query id 'q9'"),
    ("qrels.tsv", HEADER + "q1\td1\t1\nq1\td9\t1\n", "qrels.tsv:3: unknown document id 'd9'"),
]


@pytest.mark.parametrize(("file", "content", "message"), BAD_LINES)
def test_bad_line_raises_data_error_naming_file_and_line(
    tmp_path: Path, file: str, content: str, message: str
) -> None:
    root = write_collection(tmp_path / "c")
    (root / file).write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as caught:
        load_collection(root)
    text = str(caught.value)
    assert message in text
    assert text.startswith(str(root / file) + ":")
    assert "\n" not in text


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c")
    (root / "corpus.jsonl").write_bytes(CORPUS.encode() + b'{"_id": "d3", "text": "\xff"}\n')
    with pytest.raises(DataError, match=r"corpus\.jsonl:3: not valid UTF-8"):
        load_collection(root)


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels.tsv"])
def test_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    root = write_collection(tmp_path / "c")
    (root / missing).unlink()
    with pytest.raises(DataError, match=re.escape(missing) + ": file not found"):
        load_collection(root)


def test_missing_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="nowhere: collection directory not found"):
        load_collection(tmp_path / "nowhere")


def test_unknown_judgments_can_be_skipped_with_a_warning_and_a_count(tmp_path: Path) -> None:
    qrels = QRELS + "q9\td1\t1\nq1\td9\t1\n"
    root = write_collection(tmp_path / "c", qrels=qrels)
    with pytest.warns(
        UserWarning, match=r"2 judgment\(s\) skipped.*qrels\.tsv:4: unknown query id 'q9'"
    ):
        collection = load_collection(root, unknown="warn")
    assert collection.dropped_qrels == 2
    assert collection.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1}}


def test_unknown_mode_must_be_valid(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c")
    with pytest.raises(ConfigurationError, match="valid: error, warn"):
        load_collection(root, unknown="drop")  # type: ignore[arg-type]


# -- qrels formats ---------------------------------------------------------------------------------


def test_trec_qrels_txt_is_read(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", qrels=None)
    (root / "qrels.txt").write_text("q1 0 d1 2\nq1 0 d2 0\nq2  0\td2 1\n")
    collection = load_collection(root)
    assert collection.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"d2": 1}}
    assert collection.judged_query_ids() == ["q1", "q2"]


def test_four_column_qrels_tsv_without_header_is_trec(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", qrels="q1\t0\td1\t3\nq2\tQ0\td2\t-1\n")
    assert load_collection(root).qrels == {"q1": {"d1": 3}, "q2": {"d2": -1}}


def test_beir_qrels_without_header_and_with_crlf(tmp_path: Path) -> None:
    root = write_collection(tmp_path / "c", qrels="q1\td1\t1\r\nq2\td2\t2\r\n")
    assert load_collection(root).qrels == {"q1": {"d1": 1}, "q2": {"d2": 2}}


def test_integer_ids_title_defaults_and_name_override(tmp_path: Path) -> None:
    root = write_collection(
        tmp_path / "c",
        corpus='{"_id": 7, "text": "body only"}\n',
        queries='{"_id": 1, "text": "body"}\n',
        qrels="1\t7\t1\n",
    )
    collection = load_collection(root, name="Numbers")
    assert collection.name == "Numbers"
    assert collection.documents == {"7": Document("7", "", "body only")}
    assert collection.qrels == {"1": {"7": 1}}


def test_judged_query_ids_keep_file_order_and_need_a_positive_grade(tmp_path: Path) -> None:
    queries = '{"_id": "b", "text": "x"}\n{"_id": "a", "text": "y"}\n{"_id": "c", "text": "z"}\n'
    qrels = HEADER + "a\td1\t1\nc\td1\t0\nb\td2\t2\n"
    collection = load_collection(write_collection(tmp_path / "c", queries=queries, qrels=qrels))
    assert collection.judged_query_ids() == ["b", "a"]


# -- URLs ------------------------------------------------------------------------------------------


def test_url_for_and_doc_id_for_round_trip_on_cranfield() -> None:
    collection = load_collection(COLLECTIONS / "cranfield")
    assert collection.url_for("184") == "https://cranfield.evidence-bench.test/doc/184"
    for doc_id in collection.documents:
        assert collection.doc_id_for(collection.url_for(doc_id)) == doc_id


@pytest.mark.parametrize(
    "spelling",
    [
        "https://CRANFIELD.evidence-bench.test/doc/184",
        "https://cranfield.evidence-bench.test/doc/184/",
        "https://cranfield.evidence-bench.test:443/doc/184#abstract",
        "https://cranfield.evidence-bench.test/doc/184?utm_source=x",
    ],
)
def test_doc_id_for_accepts_any_spelling_of_the_canonical_url(spelling: str) -> None:
    assert load_collection(COLLECTIONS / "cranfield").doc_id_for(spelling) == "184"


def test_doc_id_for_unknown_url_is_none() -> None:
    collection = load_collection(COLLECTIONS / "cranfield")
    assert collection.doc_id_for("https://cranfield.evidence-bench.test/doc/99999") is None
    assert collection.doc_id_for("https://example.org/doc/184") is None


def test_host_is_a_slug_of_the_name() -> None:
    collection = Collection("My Coll_v2", {}, {}, {})
    assert collection.url_for("x") == "https://my-coll-v2.evidence-bench.test/doc/x"


def test_qrels_by_url_uses_canonical_urls() -> None:
    collection = load_collection(COLLECTIONS / "cacm")
    by_url = collection.qrels_by_url()
    assert set(by_url) == set(collection.qrels)
    for query_id, docs in collection.qrels.items():
        assert by_url[query_id] == {
            canonical_url(collection.url_for(doc_id)): grade for doc_id, grade in docs.items()
        }
        assert all(collection.doc_id_for(url) in docs for url in by_url[query_id])


def test_qrels_by_url_for_some_queries_on_cranfield() -> None:
    """Query 1's first judgments, read from qrels.tsv (184, 29 and 31 graded 3, 12 graded 2);
    only the queries asked for, in the order asked."""
    collection = load_collection(COLLECTIONS / "cranfield")
    by_url = collection.qrels_by_url(["2", "1"])
    assert list(by_url) == ["2", "1"]
    host = "https://cranfield.evidence-bench.test/doc/"
    assert list(by_url["1"].items())[:4] == [
        (f"{host}184", 3),
        (f"{host}29", 3),
        (f"{host}31", 3),
        (f"{host}12", 2),
    ]
    assert len(by_url["1"]) == 28
    assert by_url == {q: docs for q, docs in collection.qrels_by_url().items() if q in by_url}


@given(st.lists(st.text(min_size=0, max_size=12), min_size=1, max_size=8, unique=True))
def test_url_round_trip_for_any_doc_ids(doc_ids: list[str]) -> None:
    documents = {doc_id: Document(doc_id, "t", "x") for doc_id in doc_ids}
    collection = Collection("prop", documents, {}, {})
    urls = {collection.url_for(doc_id) for doc_id in doc_ids}
    assert len(urls) == len(doc_ids)
    for doc_id in doc_ids:
        assert collection.doc_id_for(collection.url_for(doc_id)) == doc_id


def test_the_corpus_is_read_a_line_at_a_time(tmp_path: Path) -> None:
    """Loading holds the documents and one line, never the file's bytes or lines beside
    them: the peak of traced memory exceeds what the loaded collection holds by far less
    than the file's size (reading it whole held its bytes, its text and its lines)."""
    import tracemalloc

    root = tmp_path / "big"
    root.mkdir()
    with (root / "corpus.jsonl").open("w") as out:
        for n in range(20_000):
            out.write(json.dumps({"_id": str(n), "title": f"t{n}", "text": "word " * 40}) + "\n")
    (root / "queries.jsonl").write_text('{"_id": "q", "text": "word"}\n')
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq\t1\t1\n")
    size = (root / "corpus.jsonl").stat().st_size
    tracemalloc.start()
    try:
        collection = load_collection(root)
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(collection.documents) == 20_000
    assert peak - held < size / 3, (peak - held, size)  # whole: about 3.5 times size


def test_a_corpus_gives_back_every_document_as_it_was_read(tmp_path: Path) -> None:
    docs = [
        Document("b", "Ünïcode — title", "text with \u2028 a line separator and 日本語"),
        Document("a", "", ""),
        Document("10", "lone \ud800 surrogate", ""),
        Document("2", "", "only text\nover two lines"),
    ]
    corpus = Corpus(docs)
    assert list(corpus) == ["b", "a", "10", "2"]  # file order, not sorted
    assert [corpus[d.doc_id] for d in docs] == docs
    assert list(corpus.values()) == docs and len(corpus) == 4
    assert corpus == {d.doc_id: d for d in docs}
    assert "a" in corpus and "c" not in corpus and corpus.get("c") is None
    with pytest.raises(KeyError):
        corpus["c"]
    lines = [{"_id": d.doc_id, "title": d.title, "text": d.text} for d in docs]
    root = tmp_path / "c"
    root.mkdir()
    (root / "corpus.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "1", "text": "x"}) + "\n")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n1\tb\t1\n")
    loaded = load_collection(root)
    assert isinstance(loaded.documents, Corpus)
    assert list(loaded.documents.values()) == docs
