"""Test collections in BEIR layout: documents, queries and graded judgments (qrels).

A collection directory holds ``corpus.jsonl`` (``{"_id", "title", "text"}`` per line),
``queries.jsonl`` (``{"_id", "text"}``) and ``qrels.tsv`` (``query-id  corpus-id  score`` with
a header). TREC qrels (``qid 0 docid rel``, whitespace-separated, in ``qrels.txt`` or in a
header-less four-column ``qrels.tsv``) are detected and read too.

Every line is validated as it is read: a bad line raises :class:`DataError` with
``file:line: what is wrong``. A judgment that names a query or document the collection does
not hold is an error by default (a silently dropped judgment would change every metric).

Documents are served by the simulator under ``https://<name>.evidence-bench.test/doc/<id>``
(``.test`` is reserved by RFC 2606, so the addresses can never reach a real host);
:meth:`Collection.doc_id_for` maps such an address back, so judgments keyed by ``doc_id``
apply to results keyed by canonical URL.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from array import array
from collections.abc import Container, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, unquote

from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.evidence import canonical_url

__all__ = [
    "Collection",
    "Corpus",
    "Document",
    "Query",
    "is_web_id",
    "load_collection",
    "read_judgments",
]

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
#: Where qrels are looked for, in order: BEIR's flat file, a TREC file, BEIR's split folder.
QRELS_FILES = ("qrels.tsv", "qrels.txt", "qrels/test.tsv")

_HOST_UNSAFE = re.compile(r"[^a-z0-9-]")
_HEADER_FIRST_FIELDS = frozenset({"query-id", "query_id", "qid", "query"})
_UNKNOWN_MODES = ("error", "warn")
_INTEGER = re.compile(r"[+-]?[0-9]+")
#: A grade must fit the 32-bit integer trec_eval and pandas read it into.
GRADE_MIN, GRADE_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True, slots=True)
class Document:
    """One document of a collection; ``title`` or ``text`` may be empty."""

    doc_id: str
    title: str
    text: str


class Corpus(Mapping[str, Document]):
    """A collection's documents by ``doc_id``, in file order, held compactly: every title
    and text in one UTF-8 buffer, each decoded into a :class:`Document` when it is asked
    for. A document costs its bytes, its id and two offsets, where a dict of documents
    holds three more objects for each."""

    def __init__(self, documents: Iterable[Document] = ()) -> None:
        """``documents`` in order; a repeated ``doc_id`` keeps the last."""
        self._rows: dict[str, int] = {}
        self._buffer = bytearray()
        #: document ``i``'s title is ``_buffer[_bounds[2i]:_bounds[2i + 1]]``, its text runs
        #: from there to ``_bounds[2i + 2]``
        self._bounds = array("q", [0])
        for document in documents:
            self._add(document)

    def _add(self, document: Document) -> None:
        buffer, bounds = self._buffer, self._bounds
        self._rows[document.doc_id] = len(bounds) // 2
        buffer += document.title.encode("utf-8", "surrogatepass")
        bounds.append(len(buffer))
        buffer += document.text.encode("utf-8", "surrogatepass")
        bounds.append(len(buffer))

    def __getitem__(self, doc_id: str) -> Document:
        row = self._rows[doc_id]
        start, middle, end = self._bounds[2 * row : 2 * row + 3]
        buffer = self._buffer
        return Document(
            doc_id,
            buffer[start:middle].decode("utf-8", "surrogatepass"),
            buffer[middle:end].decode("utf-8", "surrogatepass"),
        )

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._rows

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)


@dataclass(frozen=True, slots=True)
class Query:
    """One query (topic) of a collection."""

    query_id: str
    text: str


@dataclass(frozen=True, eq=False)
class Collection:
    """Documents, queries and qrels (``query_id -> doc_id -> grade``), in file order.

    ``checksum`` identifies the data: for a loaded collection it is the SHA-256 of
    ``corpus.jsonl``, ``queries.jsonl`` and the qrels file concatenated (so
    ``cat corpus.jsonl queries.jsonl qrels.tsv | sha256sum`` reproduces it); for one built in
    memory it is computed from the records. Caches keyed by it survive reloads.
    ``dropped_qrels`` counts judgments skipped with ``unknown="warn"``. Equality and hashing
    are by identity: a collection is a large container, not a value.
    """

    name: str
    documents: Mapping[str, Document] = field(repr=False)
    queries: dict[str, Query] = field(repr=False)
    qrels: dict[str, dict[str, int]] = field(repr=False)
    path: Path | None = None
    checksum: str = ""
    dropped_qrels: int = 0

    def __post_init__(self) -> None:
        if not self.checksum:
            object.__setattr__(self, "checksum", _records_checksum(self))

    def __repr__(self) -> str:
        judged = sum(len(docs) for docs in self.qrels.values())
        return (
            f"Collection(name={self.name!r}, documents={len(self.documents)}, "
            f"queries={len(self.queries)}, qrels={judged}, checksum={self.checksum[:12]!r})"
        )

    @property
    def host(self) -> str:
        """The host name documents are served under (``<slug>.evidence-bench.test``)."""
        slug = _HOST_UNSAFE.sub("-", self.name.lower()).strip("-") or "collection"
        return f"{slug}.evidence-bench.test"

    def url_for(self, doc_id: str) -> str:
        """The address the simulator serves ``doc_id`` under."""
        return f"https://{self.host}/doc/{quote(doc_id, safe='')}"

    def doc_id_for(self, url: str) -> str | None:
        """The document served at ``url`` (any spelling with the same canonical URL), or None.

        Read off the canonical URL's path (``url_for`` quotes the id whole, which
        canonicalizing keeps), then checked: nothing is held per document."""
        canonical = canonical_url(url)
        prefix = self._canonical_prefix
        if canonical.startswith(prefix):
            doc_id = unquote(canonical[len(prefix) :])
        elif canonical == prefix[:-1]:  # an empty id: its trailing slash is dropped
            doc_id = ""
        else:
            return None
        if doc_id not in self.documents or canonical_url(self.url_for(doc_id)) != canonical:
            return None
        return doc_id

    def judged_url(self, doc_id: str) -> str:
        """The canonical URL a judgment of ``doc_id`` applies to: a corpus document's, or a
        web page's own when the id is its address (:func:`is_web_id`)."""
        if is_web_id(doc_id) and doc_id not in self.documents:
            return canonical_url(doc_id)
        return canonical_url(self.url_for(doc_id))

    def qrels_by_url(self, query_ids: Iterable[str] | None = None) -> dict[str, dict[str, int]]:
        """The qrels keyed by canonical URL: ``query_id -> canonical URL -> grade``, for
        ``query_ids`` (each must have qrels) or every judged query."""
        url = self.judged_url
        return {
            query_id: {url(doc_id): grade for doc_id, grade in self.qrels[query_id].items()}
            for query_id in (self.qrels if query_ids is None else query_ids)
        }

    def judged_query_ids(self) -> list[str]:
        """Queries with at least one relevant (grade > 0) judgment, in file order."""
        return [
            query_id
            for query_id in self.queries
            if any(grade > 0 for grade in self.qrels.get(query_id, {}).values())
        ]

    @cached_property
    def _canonical_prefix(self) -> str:
        """Every document's canonical URL up to its quoted id."""
        return canonical_url(self.url_for("x"))[:-1]


def load_collection(
    path: str | Path,
    name: str | None = None,
    *,
    unknown: Literal["error", "warn"] = "error",
) -> Collection:
    """Read a BEIR-layout collection directory, validating every line.

    ``name`` defaults to the directory's name. ``unknown`` says what a qrels row naming an
    unknown query or document does: ``"error"`` raises :class:`DataError`; ``"warn"`` skips
    it, counts it in :attr:`Collection.dropped_qrels` and emits one warning per file.
    """
    if unknown not in _UNKNOWN_MODES:
        raise ConfigurationError(
            f"unknown={unknown!r} is not a valid choice (valid: {', '.join(_UNKNOWN_MODES)})"
        )
    root = Path(path)
    if not root.is_dir():
        raise DataError(f"{root}: collection directory not found")
    corpus_file = root / CORPUS_FILE
    queries_file = root / QUERIES_FILE
    qrels_file = next((root / n for n in QRELS_FILES if (root / n).is_file()), None)
    if qrels_file is None:
        raise DataError(
            f"{root / QRELS_FILES[0]}: file not found (nor {', '.join(QRELS_FILES[1:])})"
        )

    # Each file is read a line at a time and hashed as it passes (the checksum is of the
    # three files' bytes in this order): its bytes and lines are never held whole.
    digest = hashlib.sha256()
    documents = Corpus(
        Document(
            doc_id,
            _text_field(record, "title", corpus_file, n),
            _text_field(record, "text", corpus_file, n),
        )
        for n, doc_id, record in _records(corpus_file, digest, "document")
    )
    queries = {
        query_id: Query(query_id, _text_field(record, "text", queries_file, n, required=True))
        for n, query_id, record in _records(queries_file, digest, "query")
    }
    qrels, dropped = _read_qrels(qrels_file, digest, documents, queries, unknown)

    return Collection(
        name=name or root.resolve().name,
        documents=documents,
        queries=queries,
        qrels=qrels,
        path=root,
        checksum=digest.hexdigest(),
        dropped_qrels=dropped,
    )


def is_web_id(doc_id: str) -> bool:
    """Whether a corpus id is a web page's address (``http://`` or ``https://``): how a
    judgment names a result that is not in the corpus, as ``documents.jsonl`` does."""
    return doc_id.startswith(("https://", "http://"))


class _CorpusOrWeb:
    """The ids a judgments file may name: the corpus's, and web addresses."""

    def __init__(self, documents: Container[str]) -> None:
        self._documents = documents

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._documents or (isinstance(doc_id, str) and is_web_id(doc_id))


class _Anything:
    def __contains__(self, item: object) -> bool:
        return True


def read_judgments(
    file: str | Path, collection: Collection | None = None
) -> dict[str, dict[str, int]]:
    """A qrels file (BEIR or TREC layout, as :func:`load_collection` reads it):
    ``query_id -> corpus id -> grade``. For ``collection``'s queries, a corpus id is one of
    its documents or a web address (:func:`is_web_id`), and anything else or an unknown
    query is a :class:`DataError` naming the file and line; without one, any id is kept."""
    path = Path(file)
    documents: Container[str] = _Anything()
    queries: Container[str] = _Anything()
    if collection is not None:
        documents, queries = _CorpusOrWeb(collection.documents), collection.queries
    judgments, _ = _read_qrels(path, hashlib.sha256(), documents, queries, "error")
    return judgments


def _lines(file: Path, digest: Any) -> Iterator[tuple[int, str]]:
    """Non-blank lines with their 1-based numbers, each line's bytes added to ``digest`` as
    it is read; CRLF and a UTF-8 BOM (at the file's start) are accepted."""
    try:
        with file.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                digest.update(raw)
                try:
                    line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
                except UnicodeDecodeError as exc:
                    raise DataError(f"{file}:{number}: not valid UTF-8 ({exc.reason})") from exc
                stripped = line.removesuffix("\n").rstrip("\r")
                if stripped.strip():
                    yield number, stripped
    except FileNotFoundError:
        raise DataError(f"{file}: file not found") from None
    except OSError as exc:
        raise DataError(f"{file}: cannot be read ({exc.strerror})") from exc


def _records(file: Path, digest: Any, kind: str) -> Iterator[tuple[int, str, dict[str, object]]]:
    """JSON objects with a unique ``_id`` (an int id is read as its decimal string)."""
    first_seen: dict[str, int] = {}
    for number, line in _lines(file, digest):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DataError(
                f"{file}:{number}: invalid JSON ({exc.msg} at column {exc.colno})"
            ) from exc
        if not isinstance(record, dict):
            raise DataError(
                f"{file}:{number}: expected a JSON object, found {type(record).__name__}"
            )
        raw_id = record.get("_id")
        if raw_id is None:
            raise DataError(f"{file}:{number}: missing '_id'")
        if isinstance(raw_id, bool) or not isinstance(raw_id, str | int):
            raise DataError(f"{file}:{number}: '_id' must be a string, found {raw_id!r}")
        item_id = str(raw_id).strip()
        if not item_id:
            raise DataError(f"{file}:{number}: '_id' is empty")
        if item_id in first_seen:
            raise DataError(
                f"{file}:{number}: duplicate {kind} id {item_id!r} "
                f"(first on line {first_seen[item_id]})"
            )
        first_seen[item_id] = number
        yield number, item_id, record


def _text_field(
    record: dict[str, object], key: str, file: Path, number: int, *, required: bool = False
) -> str:
    value = record.get(key)
    if value is None:
        if required:
            raise DataError(f"{file}:{number}: missing {key!r}")
        return ""
    if not isinstance(value, str):
        raise DataError(f"{file}:{number}: {key!r} must be a string, found {value!r}")
    if required and not value.strip():  # (a query: nothing to search for)
        raise DataError(f"{file}:{number}: {key!r} is empty")
    return value


def _read_qrels(
    file: Path,
    digest: Any,
    documents: Container[str],
    queries: Container[str],
    unknown: str,
) -> tuple[dict[str, dict[str, int]], int]:
    """BEIR (``query-id corpus-id score``) or TREC (``qid iter docid rel``), by column count."""
    qrels: dict[str, dict[str, int]] = {}
    first_seen: dict[tuple[str, str], int] = {}
    dropped: list[str] = []
    trec: bool | None = None
    for number, line in _lines(file, digest):
        words = line.split()
        # BEIR is tab-separated (an id may hold a space); TREC is any whitespace.
        cells = [cell.strip() for cell in line.split("\t")] if "\t" in line else words
        fields = words if trec else cells
        if trec is None:  # the first line decides the format
            trec = len(words) == 4 and len(cells) != 3
            fields = words if trec else cells
            if not trec and len(fields) == 3 and fields[0].lower() in _HEADER_FIRST_FIELDS:
                continue
        expected = 4 if trec else 3
        if len(fields) != expected:
            layout = (
                "TREC: query-id iteration doc-id relevance" if trec else "query-id corpus-id score"
            )
            raise DataError(
                f"{file}:{number}: expected {expected} columns ({layout}), found {len(fields)}"
            )
        query_id, doc_id, score = (fields[0], fields[2], fields[3]) if trec else fields
        if not _INTEGER.fullmatch(score):
            raise DataError(f"{file}:{number}: score {_cut(score)!r} is not an integer")
        digits = score.lstrip("+-").lstrip("0")
        grade = int(score) if len(digits) <= 10 else GRADE_MAX + 1  # int() of 5000 digits fails
        if not GRADE_MIN <= grade <= GRADE_MAX:
            raise DataError(
                f"{file}:{number}: score {_cut(score)} is out of range (a relevance grade is a "
                f"small integer, {GRADE_MIN} to {GRADE_MAX})"
            )
        if (query_id, doc_id) in first_seen:
            raise DataError(
                f"{file}:{number}: duplicate judgment for query {query_id!r} and document "
                f"{doc_id!r} (first on line {first_seen[query_id, doc_id]})"
            )
        first_seen[query_id, doc_id] = number
        problem = ""
        if query_id not in queries:
            problem = f"unknown query id {query_id!r} (not in {QUERIES_FILE})"
        elif doc_id not in documents:
            problem = f"unknown document id {doc_id!r} (not in {CORPUS_FILE})"
        if problem:
            if unknown == "error":
                raise DataError(f"{file}:{number}: {problem}")
            dropped.append(f"{file}:{number}: {problem}")
            continue
        qrels.setdefault(query_id, {})[doc_id] = grade
    if dropped:
        warnings.warn(
            f"{len(dropped)} judgment(s) skipped for an unknown query or document; "
            f"first: {dropped[0]}",
            UserWarning,
            stacklevel=3,
        )
    return qrels, len(dropped)


def _cut(text: str, limit: int = 40) -> str:
    """``text`` short enough for a one-line message."""
    return text if len(text) <= limit else f"{text[:limit]}..."


def _records_checksum(collection: Collection) -> str:
    """SHA-256 of the records in a canonical JSON form, for collections built in memory."""
    digest = hashlib.sha256()
    for doc in collection.documents.values():
        digest.update(json.dumps(["d", doc.doc_id, doc.title, doc.text]).encode() + b"\n")
    for query in collection.queries.values():
        digest.update(json.dumps(["q", query.query_id, query.text]).encode() + b"\n")
    for query_id, docs in collection.qrels.items():
        for doc_id, grade in docs.items():
            digest.update(json.dumps(["r", query_id, doc_id, grade]).encode() + b"\n")
    return digest.hexdigest()
