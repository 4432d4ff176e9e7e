"""A query set: the queries sent, their judgments, and where their cassettes are.

Queries are sent as Brave would accept them: a collection query over Brave's limits (some
CACM queries have 73 words) is cut to the first 50 words and 400 characters, and the run
records how many were cut.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evidence_bench._resources import PACKAGED, packaged
from evidence_bench.collections.beir import Collection, load_collection, read_judgments
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import MAX_QUERY_CHARS, MAX_QUERY_WORDS

__all__ = ["QuerySet", "brave_query", "load_query_set", "resolve_path", "unjudged_notice"]


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


def load_query_set(conf: Mapping[str, Any], *, limit: int | None) -> QuerySet:
    """The query set a config names; ``limit`` keeps the first N judged queries.

    A query without a document judged relevant is left out (trec_eval scores such a query
    0 in every measure, which says nothing of a ranker) and counted in
    :attr:`QuerySet.unjudged`; the run says how many (:func:`unjudged_notice`)."""
    name = str(conf["name"])
    path = resolve_path(str(conf["path"]), "query_set.path")
    cassettes = resolve_path(str(conf["cassettes"]), "query_set.cassettes")
    source = str(conf.get("source", "collection"))
    if source not in ("collection", "live"):
        raise ConfigurationError(
            f"query_set.source={source!r} is not valid (valid: collection, live)"
        )
    collection = _collection(str(path), name)
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
