"""A query set: the queries sent, their judgments, and where their cassettes are.

Queries are sent as Brave would accept them: a collection query over Brave's limits (some
CACM queries have 73 words) is cut to the first 50 words and 400 characters, and the run
records how many were cut.

The collection is read from ``query_set.path`` (BEIR layout), or built by a loader of the
user's own, ``query_set._target_`` (:func:`loaded_collection`), so data in any format runs
without conversion.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from evidence_bench._resources import PACKAGED, packaged
from evidence_bench._targets import TARGET, build, call_params, frozen
from evidence_bench.collections.beir import (
    Collection,
    Corpus,
    Document,
    Query,
    is_web_id,
    load_collection,
    read_judgments,
)
from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.evidence import MAX_QUERY_CHARS, MAX_QUERY_WORDS

__all__ = [
    "QuerySet", "QuerySetLoader", "QuerySetRecords", "brave_query", "load_query_set",
    "loaded_collection", "resolve_path", "unjudged_notice",
]  # fmt: skip


def resolve_path(value: str, key: str) -> Path:
    """A path from a config value: ``pkg://REL`` is the package's shipped data
    (:mod:`evidence_bench._resources`), an absolute path is itself, and any other relative
    path is against the working directory, never the package. A path that does not exist
    is an error naming ``key``, but for ``*cassettes`` and ``runs_dir`` (``record`` and
    ``run`` create them)."""
    if value.startswith(PACKAGED):
        path = packaged(value.removeprefix(PACKAGED))
        if path.is_relative_to(Path.cwd()):  # a checkout's own: named as before, relative
            path = path.relative_to(Path.cwd())
    else:
        path = Path(value).expanduser()
    if path.exists() or key.endswith("cassettes") or key == "runs_dir":
        return path
    where = "" if path.is_absolute() else f" (in {Path.cwd()})"
    raise ConfigurationError(f"{key}={value!r}: no such file or directory{where}")


def brave_query(text: str) -> str:
    """The query text cut to Brave's limits (50 words, 400 characters), on word boundaries."""
    words = text.split()[:MAX_QUERY_WORDS]
    while len(" ".join(words)) > MAX_QUERY_CHARS:
        words.pop()
    return " ".join(words)


@dataclass(frozen=True)
class QuerySet:
    name: str
    collection: Collection
    cassettes: Path
    source: str
    #: query_id -> the query as sent, in file order, judged queries only
    queries: Mapping[str, str]
    #: query_id -> canonical URL -> grade, for the queries above
    qrels: Mapping[str, Mapping[str, int]]
    truncated: int
    #: queries of the collection left out because no document is judged relevant for them
    unjudged: int = 0
    #: the highest grade of the whole collection's qrels with the added ones (at least 1):
    #: the scale a user without a ``top_grade`` reads grades on
    top_grade: int = 1


@functools.cache
def _collection(path: str, name: str) -> Collection:
    return load_collection(path, name=name)


def _added_judgments(file: object, collection: Collection) -> dict[str, dict[str, int]]:
    """``query_set.qrels``'s judgments keyed by canonical URL (none when it is unset)."""
    if file in (None, ""):
        return {}
    path = resolve_path(str(file), "query_set.qrels")
    return {
        qid: {collection.judged_url(doc_id): grade for doc_id, grade in grades.items()}
        for qid, grades in read_judgments(path, collection).items()
    }


def _judged_ids(collection: Collection, added: Mapping[str, Mapping[str, int]]) -> list[str]:
    """Queries with a relevant judgment in the collection's qrels or the added ones, in
    file order."""
    if not added:
        return collection.judged_query_ids()
    relevant = {qid for qid, grades in added.items() if any(g > 0 for g in grades.values())}
    own = set(collection.judged_query_ids())
    return [qid for qid in collection.queries if qid in own or qid in relevant]


class QuerySetRecords(Protocol):
    """What a query-set loader returns (as attributes, or as the keys of a dict): every
    document, every query, and the judgments, each keyed by its own id.

    ``documents``: ``doc_id -> Document``, a ``{"title", "text"}`` mapping, or the text;
    ``queries``: ``query_id -> Query`` or the text; ``qrels``: ``query_id -> doc_id ->
    grade`` (an int; <= 0 judged non-relevant). A :class:`~evidence_bench.collections.beir.
    Collection` is one too. Checked as :func:`load_collection` checks files.
    """

    @property
    def documents(self) -> Mapping[str, Document | Mapping[str, str] | str]: ...

    @property
    def queries(self) -> Mapping[str, Query | str]: ...

    @property
    def qrels(self) -> Mapping[str, Mapping[str, int]]: ...


class QuerySetLoader(Protocol):
    """A loader of the user's own data, named by ``query_set._target_``: called with the keys
    of the ``query_set`` node it takes (its own, and ``path``), it returns the records."""

    def __call__(self, **params: Any) -> QuerySetRecords | Mapping[str, Any]: ...


#: The keys of ``query_set`` the harness reads itself, never passed to a loader; ``path``
#: is passed to one that takes it.
_HARNESS = ("name", "cassettes", "source", "limit", "qrels")
_OFFERED = ("path",)


@functools.cache
def _loaded(
    name: str, target: str, params: tuple[tuple[str, Any], ...], stamp: tuple[Any, ...]
) -> Collection:
    """The loader's collection, once a process for the same parameters and the same
    ``stamp`` of the files they name (:func:`_stamp`): a changed file is loaded again."""
    return loaded_collection(name, target, build("query_set", target, params))


def _stamp(value: Any) -> tuple[Any, ...]:
    """Each file a parameter value names (a file, or every file under a directory) with its
    size and modification time: what a loader given ``path`` reads."""
    if isinstance(value, tuple):
        return tuple(part for item in value for part in _stamp(item))
    if not isinstance(value, str) or not value or "\0" in value:
        return ()
    path = Path(value).expanduser()
    try:
        if path.is_file():
            return ((str(path), path.stat().st_mtime_ns, path.stat().st_size),)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            return tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    except OSError:
        return ()
    return ()


def _records(target: str, found: object, part: str) -> Any:
    """``part`` (documents, queries, qrels) of a loader's result: an attribute or a key."""
    value = found.get(part) if isinstance(found, Mapping) else getattr(found, part, None)
    if not isinstance(value, Mapping):
        raise DataError(
            f"query_set.{TARGET}={target}: the loader's result has no {part} mapping "
            "(return an object or dict with documents, queries and qrels)"
        )
    return value


def loaded_collection(name: str, target: str, found: object) -> Collection:
    """The collection a loader returned, validated as :func:`load_collection` validates
    files: ``found`` is a :class:`Collection`, or has (as attributes or keys) ``documents``
    (``doc_id -> Document``, ``{"title", "text"}`` or text), ``queries`` (``query_id ->
    Query`` or text) and ``qrels`` (``query_id -> doc_id -> grade``, an int). A judgment of a
    query or document it does not hold (but a web address, as in a qrels file) is an error
    naming the loader."""
    if isinstance(found, Collection):
        found = {"documents": found.documents, "queries": found.queries, "qrels": found.qrels}
    at = f"query_set.{TARGET}={target}"
    documents: dict[str, Document] = {}
    for doc_id, doc in _records(target, found, "documents").items():
        if isinstance(doc, Document):
            documents[str(doc_id)] = Document(str(doc_id), doc.title, doc.text)
        elif isinstance(doc, Mapping):
            title, text = doc.get("title", ""), doc.get("text", "")
            documents[str(doc_id)] = Document(str(doc_id), str(title or ""), str(text or ""))
        elif isinstance(doc, str):
            documents[str(doc_id)] = Document(str(doc_id), "", doc)
        else:
            raise DataError(f"{at}: document {doc_id!r} is {type(doc).__name__}, not text")
    queries: dict[str, Query] = {}
    for query_id, query in _records(target, found, "queries").items():
        text = query.text if isinstance(query, Query) else query
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{at}: query {query_id!r} has no text")
        queries[str(query_id)] = Query(str(query_id), text)
    qrels: dict[str, dict[str, int]] = {}
    for query_id, grades in _records(target, found, "qrels").items():
        if str(query_id) not in queries:
            raise DataError(f"{at}: the qrels judge query {query_id!r}, which it does not hold")
        if not isinstance(grades, Mapping):
            raise DataError(f"{at}: the qrels of query {query_id!r} are not doc_id -> grade")
        for doc_id, grade in grades.items():
            if str(doc_id) not in documents and not is_web_id(str(doc_id)):
                raise DataError(
                    f"{at}: the qrels of query {query_id!r} judge document {doc_id!r}, "
                    "which it does not hold"
                )
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise DataError(
                    f"{at}: the grade of query {query_id!r} document {doc_id!r} is "
                    f"{grade!r}, not an integer"
                )
        qrels[str(query_id)] = {str(doc_id): grade for doc_id, grade in grades.items()}
    return Collection(name, Corpus(documents.values()), queries, qrels)


def _query_set_collection(conf: Mapping[str, Any], name: str) -> tuple[Collection, str]:
    """The collection ``conf`` names (from ``path``, or its loader) and where it is."""
    if conf.get(TARGET):
        target = str(conf[TARGET])
        params = call_params("query_set", conf, harness=_HARNESS, defaults={}, offered=_OFFERED)
        key = frozen(params)
        return _loaded(name, target, key, _stamp(key)), target
    path = resolve_path(str(conf["path"]), "query_set.path")
    return _collection(str(path), name), str(path)


def _cassettes(conf: Mapping[str, Any], name: str) -> str:
    """``query_set.cassettes``; a loader's query set without one: ``cassettes/<name>``."""
    cassettes = conf.get("cassettes")
    if cassettes in (None, "???") and conf.get(TARGET):
        return f"cassettes/{name}"
    return str(cassettes)


def load_query_set(conf: Mapping[str, Any], *, limit: int | None) -> QuerySet:
    """The query set a config names; ``limit`` keeps the first N judged queries.

    A query without a document judged relevant is left out (trec_eval scores such a query
    0 in every measure, which says nothing of a ranker) and counted in
    :attr:`QuerySet.unjudged`; the run says how many (:func:`unjudged_notice`)."""
    name = str(conf["name"])
    source = str(conf.get("source", "collection"))
    if source not in ("collection", "live"):
        raise ConfigurationError(
            f"query_set.source={source!r} is not valid (valid: collection, live)"
        )
    collection, path = _query_set_collection(conf, name)
    cassettes = resolve_path(_cassettes(conf, name), "query_set.cassettes")
    added = _added_judgments(conf.get("qrels"), collection)
    ids = _judged_ids(collection, added)
    caps = [n for n in (limit, conf.get("limit")) if n is not None]
    if caps:
        ids = ids[: min(caps)]
    if not ids:
        raise ConfigurationError(
            f"query set {name!r} at {path} has no judged query: none of its "
            f"{len(collection.queries)} queries has a document judged relevant "
            "(a grade above 0 in its qrels or in query_set.qrels)"
        )
    queries = {qid: brave_query(collection.queries[qid].text) for qid in ids}
    truncated = sum(
        1 for qid in ids if queries[qid] != " ".join(collection.queries[qid].text.split())
    )
    own = collection.qrels_by_url([qid for qid in ids if qid in collection.qrels])
    # a judgment in query_set.qrels replaces the collection's for its query and document
    qrels = {qid: {**own.get(qid, {}), **added.get(qid, {})} for qid in ids}
    unjudged = len(collection.queries) - len(_judged_ids(collection, added))
    top = _top_grade(collection, added)
    return QuerySet(name, collection, cassettes, source, queries, qrels, truncated, unjudged, top)


def unjudged_notice(query_set: QuerySet) -> str:
    """The run's one-line notice of the queries left out for want of a relevant judgment,
    or "" when none was."""
    if not query_set.unjudged:
        return ""
    total = len(query_set.collection.queries)
    return (
        f"note: {query_set.unjudged} of the {total} queries of {query_set.name!r} left out: "
        "no document is judged relevant for them (add judgments with query_set.qrels)"
    )


def _top_grade(collection: Collection, added: Mapping[str, Mapping[str, int]]) -> int:
    """The highest grade over every query of the collection, an added judgment replacing the
    collection's for its query and document (so an added grade can raise or lower it)."""
    grades = [1, *(g for docs in collection.qrels.values() for g in docs.values())]
    if not added:
        return max(grades)
    grades = [1]
    for query_id in set(collection.qrels) | set(added):
        own = collection.qrels_by_url([query_id]) if query_id in collection.qrels else {}
        grades.extend({**own.get(query_id, {}), **added.get(query_id, {})}.values())
    return max(grades)
