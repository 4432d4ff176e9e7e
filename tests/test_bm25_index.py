"""The simulator's BM25 index: its rankings on Cranfield and CACM as before its sparse layout,
built or loaded from its saved copy; the saved copy keyed by the collection's checksum.

``tests/data/bm25_rankings.json`` was captured from the index of ``main`` at 1cdb193 (postings
with their weights precomputed, before the CSC layout), for each query of both collections
and the title and first 200 characters of text of each of their first 60 documents as
queries: the number of documents reached, the first 5 ``(doc_id, score)`` with the score as
``float.hex`` and the sha256 of every reached ``doc_id<TAB>score.hex()`` line, best first. It
is never rewritten: a difference is a change of the simulator's rankings.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from evidence_bench.collections.beir import Collection, load_collection
from evidence_bench.web import bm25, saved_index
from evidence_bench.web.bm25 import INDEX_FORMAT, BM25Index, analysis_fingerprint
from evidence_bench.web.saved_index import CACHE_ENV, collection_index, index_directory
from tests.conftest import write_tiny_collection

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = json.loads((ROOT / "tests" / "data" / "bm25_rankings.json").read_text())


def _queries(collection: Collection) -> dict[str, str]:
    made = {f"q{q.query_id}": q.text for q in collection.queries.values()}
    for doc in list(collection.documents.values())[:60]:
        made[f"d{doc.doc_id}"] = f"{doc.title} {doc.text[:200]}"
    return made


def _differences(index: BM25Index, collection: Collection, name: str) -> list[str]:
    pinned = GOLDEN["collections"][name]
    assert pinned["checksum"] == collection.checksum
    queries = _queries(collection)
    assert sorted(queries) == sorted(pinned["queries"])
    differ = []
    for key, text in queries.items():
        ranked = index.search(text, len(collection.documents))
        lines = "".join(f"{doc}\t{score.hex()}\n" for doc, score in ranked)
        found = {
            "reached": len(ranked),
            "top": [[doc, score.hex()] for doc, score in ranked[:5]],
            "sha256": hashlib.sha256(lines.encode()).hexdigest(),
        }
        if found != pinned["queries"][key]:
            differ.append(key)
    return differ


@pytest.mark.parametrize("name", ["cranfield", "cacm"])
def test_rankings_are_those_pinned_built_and_loaded(name: str, tmp_path: Path) -> None:
    collection = load_collection(ROOT / "collections" / name, name=name)
    built = BM25Index((d.doc_id, f"{d.title} {d.text}") for d in collection.documents.values())
    assert _differences(built, collection, name) == []
    built.save(tmp_path)
    loaded = BM25Index.load(tmp_path, list(collection.documents))
    assert isinstance(loaded._docs, np.memmap)  # mapped, not read
    assert _differences(loaded, collection, name) == []


def test_the_index_takes_a_mapping_or_pairs_alike() -> None:
    docs = {"3": "heat flux heat", "1": "flux of the slab", "2": "heat"}
    assert BM25Index(docs).search("heat flux", 3) == BM25Index(docs.items()).search("heat flux", 3)


def test_a_term_frequency_past_uint16_is_kept_exactly() -> None:
    index = BM25Index({"a": "heat " * 70_000, "b": "heat flux", "c": "flux"})
    (doc_a, score_a), (doc_b, _) = index.search("heat", 2)
    idf = index.idf("heat")
    norm = 0.9 * ((1 - 0.4) + 0.4 * 70_000 / ((70_000 + 2 + 1) / 3))
    assert (doc_a, doc_b) == ("a", "b")
    assert score_a == idf * 70_000.0 * 1.9 / (70_000.0 + norm)


def test_a_saved_index_is_reused_by_the_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    collection = load_collection(write_tiny_collection(tmp_path / "tiny"))
    first = collection_index(collection)
    directory = index_directory(collection)
    name = f"{collection.checksum}-v{INDEX_FORMAT}-{analysis_fingerprint()}"
    assert directory == tmp_path / "cache" / "bm25" / name
    assert directory.is_dir() and sorted(os.listdir(directory.parent)) == [directory.name]

    def never(_collection: Collection) -> BM25Index:
        raise AssertionError("built again")

    monkeypatch.setattr(saved_index, "build_index", never)
    again = collection_index(load_collection(tmp_path / "tiny"))
    assert again.search("heat flux", 10) == first.search("heat flux", 10) != []


def test_an_index_saved_with_another_stop_list_is_not_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache shared across versions: the index a version with another stop list saved
    is built again, not read (its postings would lack the words that stop list drops)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    collection = load_collection(write_tiny_collection(tmp_path / "tiny", payload="the "))
    assert collection_index(collection).search("the", 10) == []  # a stop word: no postings
    monkeypatch.setattr(bm25, "STOP_WORDS", bm25.STOP_WORDS - {"the"})
    again = collection_index(load_collection(tmp_path / "tiny"))
    assert again.search("the", 10) != []
    assert len(os.listdir(tmp_path / "cache" / "bm25")) == 2


def test_an_index_saved_with_another_k1_or_b_is_refused(tmp_path: Path) -> None:
    docs = {"1": "heat flux heat", "2": "flux of the slab"}
    BM25Index(docs, k1=1.2).save(tmp_path)
    with pytest.raises(ValueError, match="another k1 or b"):
        BM25Index.load(tmp_path, list(docs))  # the default k1 is 0.9
    BM25Index(docs, b=0.75).save(tmp_path)
    with pytest.raises(ValueError, match="another k1 or b"):
        BM25Index.load(tmp_path, list(docs))
    loaded = BM25Index.load(tmp_path, list(docs), b=0.75)
    assert loaded.search("heat", 2) == BM25Index(docs, b=0.75).search("heat", 2)


def test_another_collection_has_its_own_saved_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    one = load_collection(write_tiny_collection(tmp_path / "one"))
    other = load_collection(write_tiny_collection(tmp_path / "other", payload="wing "))
    collection_index(one), collection_index(other)
    assert index_directory(one) != index_directory(other)
    assert len(os.listdir(tmp_path / "cache" / "bm25")) == 2


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-4])


def _one_byte_changed(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01  # the last posting's term frequency: the shapes still fit together
    path.write_bytes(bytes(data))


def _not_an_array(path: Path) -> None:
    path.write_bytes(b"not an array")


@pytest.mark.parametrize(
    ("file", "damage"),
    [
        ("docs.npy", _not_an_array),
        ("tf.npy", _truncated),
        ("tf.npy", _one_byte_changed),
        ("terms.txt", _one_byte_changed),
        ("index.json", _truncated),
        ("index.json", lambda path: path.write_text("[]")),
    ],
)
def test_a_damaged_saved_index_is_built_again(
    file: str, damage: Callable[[Path], None], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    collection = load_collection(write_tiny_collection(tmp_path / "tiny"))
    expected = [
        collection_index(collection).search(q.text, 48) for q in collection.queries.values()
    ]
    directory = index_directory(collection)
    assert directory is not None
    damage(directory / file)
    with pytest.raises(ValueError, match=r"index|not the file"):
        BM25Index.load(directory, list(collection.documents))
    again = collection_index(collection)
    assert [again.search(q.text, 48) for q in collection.queries.values()] == expected
    reloaded = BM25Index.load(directory, list(collection.documents))  # saved whole again
    assert [reloaded.search(q.text, 48) for q in collection.queries.values()] == expected


def test_a_changed_collection_never_loads_the_old_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    root = write_tiny_collection(tmp_path / "tiny")
    before = load_collection(root)
    assert collection_index(before).search("wingspan", 5) == []
    corpus = root / "corpus.jsonl"
    lines = corpus.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    lines[0] = json.dumps({**first, "text": first["text"] + " wingspan"}) + "\n"
    corpus.write_text("".join(lines))  # same documents, one word more in the first
    after = load_collection(root)
    assert after.checksum != before.checksum
    assert index_directory(after) != index_directory(before)
    assert [doc for doc, _ in collection_index(after).search("wingspan", 5)] == [first["_id"]]
    assert collection_index(before).search("wingspan", 5) == []  # the old one is its own


def test_no_cache_directory_saves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "")
    collection = load_collection(write_tiny_collection(tmp_path / "tiny"))
    assert index_directory(collection) is None
    assert collection_index(collection).search("heat", 3) != []
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "file"))
    (tmp_path / "file").write_text("a file, not a directory")
    assert collection_index(collection).search("heat", 3) != []  # built, not saved


def test_the_default_cache_directory_is_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere/cache")
    assert saved_index.cache_directory() == Path("/somewhere/cache/evidence_bench")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert saved_index.cache_directory() == Path.home() / ".cache" / "evidence_bench"
