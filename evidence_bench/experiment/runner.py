"""The experiment runner: replay every episode of a planned run and collect its rows.

The work is split by query: a worker replays one query's cassette for every engine config
and user, so each cassette is parsed once per process, and queries spread over the cores (a
few consecutive queries a task, one a task at the end).
Results come back in query order and every random draw is seeded per (seed, query, round,
document), so the numbers do not depend on the number of workers.

A worker's failure ends the run with one line: an error of the package travels to the parent
as it is (every one survives pickling), any other becomes a :class:`WorkerError` naming the
query, and a worker process that dies (killed, out of memory) breaks the pool, which is
reported instead of waited on forever.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import pickle
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np

from evidence_bench._trim import release_memory
from evidence_bench.collections.queryset import QuerySet, load_query_set
from evidence_bench.engine.background import Background, query_set_background
from evidence_bench.engine.base import Ranker, Refiner, SearchProvider
from evidence_bench.engine.evidence_mode import PageSource
from evidence_bench.engine.ranking import pool_matrix
from evidence_bench.errors import (
    EvidenceBenchError,
    RequestError,
    ResponseFormatError,
    WorkerError,
)
from evidence_bench.evaluation.measures import prepare
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.components import (
    EngineConfig,
    make_ranker,
    make_refiner,
    make_user,
    replay_provider,
    user_params,
)
from evidence_bench.experiment.episodes import PlannedEpisode, plan_episodes
from evidence_bench.experiment.memo import QueryMemo
from evidence_bench.experiment.plan import RunPlan, deep_limit
from evidence_bench.experiment.targets import user_provider
from evidence_bench.protocol.episode import EpisodeResult, Judgments
from evidence_bench.runs.store import (
    EpisodeRound,
    QueryRows,
    QueryRowsBuilder,
    query_rows,
)
from evidence_bench.users.policies import UserPolicy
from evidence_bench.web.cassettes import (
    CassetteStore,
    OnMiss,
    ReplayClient,
    SkippedRequest,
    cassette_path,
)
from evidence_bench.web.page_cassettes import PageStore
from evidence_bench.web.simulator import (
    BraveSimulator,
    SimulatorTransport,
    forget_indexes,
    prepare_index,
)

__all__ = [
    "MemoProvider",
    "QueryOutput",
    "ReplayWorker",
    "ReplayedQuery",
    "engine_parts",
    "execute",
    "first_page_background",
    "plan_users",
    "query_episodes",
    "query_output",
    "replay_query",
    "replay_worker",
    "search_store",
]


@dataclass
class QueryOutput:
    """One query's results for every engine config and user: its rows, in the compact
    columns a worker sends the parent (:class:`~evidence_bench.runs.store.QueryRows`),
    and the counts the run sums."""

    query_id: str
    rows: QueryRows = field(default=None)  # type: ignore[assignment]
    #: every document the query's searches answered, by key; from a worker, only those it
    #: had not sent with an earlier query (:func:`execute`)
    documents: dict[str, Evidence] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    skipped_expands: int = 0
    no_usable_feedback: int = 0
    missing_dates: int = 0
    #: whether the first page of the initial search came from the cassette, and how many of
    #: its results the qrels judge (none in every cassette: a query set named unlike the
    #: collection its cassettes were recorded from)
    replayed_initial: bool = False
    judged_hits: int = 0

    def __post_init__(self) -> None:
        if self.rows is None:
            self.rows = QueryRows(self.query_id)

    @classmethod
    def from_rows(
        cls,
        query_id: str,
        *,
        scores: Sequence[Sequence[Any]] = (),
        feedback: Sequence[Sequence[Any]] = (),
        episodes: Sequence[Mapping[str, Any]] = (),
        rankings: Mapping[tuple[str, str, int, str], Sequence[str]] | None = None,
    ) -> QueryOutput:
        """A query's output from its rows (a shard's tables read back):
        :func:`~evidence_bench.runs.store.query_rows`."""
        rows = query_rows(query_id, scores, feedback, episodes, rankings or {})
        return cls(query_id, rows)

    @property
    def scores(self) -> list[tuple[str, str, str, int, str, str, str, float]]:
        """The per-query values as (config_id, policy, query_id, round, stage, eval_mode,
        measure, value) rows (built on each call: the run's tables read :attr:`rows`)."""
        return self.rows.score_rows()

    @property
    def feedback(self) -> list[tuple[str, str, str, int, str, str, str, int]]:
        """Every examined document as (config_id, policy, query_id, round, doc_id, label,
        url, rank) rows (built on each call)."""
        return self.rows.feedback_rows()

    @property
    def episodes(self) -> list[tuple[int, str, list[EpisodeRound]]]:
        """One entry per (engine config, user) episode (:attr:`QueryRows.episodes`)."""
        return self.rows.episodes


class MemoProvider:
    """Answers a repeated search from memory: every config of a query asks the same first
    question, and most ask the same refined one."""

    def __init__(self, provider: SearchProvider) -> None:
        self._provider = provider
        self._answers: dict[tuple[str, int], list[Evidence] | None] = {}

    def search(self, query: str, *, limit: int) -> list[Evidence]:
        key = (query, limit)
        if key not in self._answers:
            try:
                self._answers[key] = self._provider.search(query, limit=limit)
            except SkippedRequest:
                self._answers[key] = None
        answer = self._answers[key]
        if answer is None:
            raise SkippedRequest(query)
        return answer

    def answers(self) -> Iterator[list[Evidence]]:
        """Every answer given, in the order first asked."""
        return (answer for answer in self._answers.values() if answer is not None)

    def asked(self) -> list[tuple[str, int]]:
        """Every (query, limit) asked so far, in the order first asked."""
        return list(self._answers)

    def reorder(self, asked: Sequence[tuple[str, int]]) -> None:
        """Number the answers as if the searches had first been asked in ``asked``'s order
        (each after those asked before it); searches not in it keep their place after.
        :func:`query_episodes` plans a query's episodes round by round, and says here in
        which order one episode after another would have asked."""
        answers = self._answers
        ordered = {key: answers[key] for key in asked if key in answers}
        ordered.update(answers)
        self._answers = ordered


@dataclass
class ReplayWorker:
    """What one process builds once and reuses for all its queries."""

    plan: RunPlan
    query_set: QuerySet
    store: CassetteStore
    engines: EngineParts
    users: list[tuple[str, UserPolicy]]
    #: the page cassette, where some engine config reads pages
    pages: PageStore | None = None
    #: the user's search provider (``search_provider``), asked instead of the cassettes
    search: SearchProvider | None = None


_WORKER: ReplayWorker | None = None


def replay_worker(plan: RunPlan) -> ReplayWorker:
    """The process's query set, cassette store, engines and users for ``plan``."""
    global _WORKER
    if _WORKER is None or _WORKER.plan != plan:  # built once per process and plan
        query_set = load_query_set(plan.query_set, limit=plan.query_limit)
        collection = query_set.collection
        store = search_store(query_set, plan.on_miss, plan.record_command)
        pages = None
        if plan.reads_pages:
            rate = plan.page_failure_rate
            pages = PageStore(
                query_set.cassettes,
                on_miss=plan.on_miss,
                failure_rate=rate,
                fallback=(
                    (lambda: SimulatorTransport(BraveSimulator(collection, page_failure_rate=rate)))
                    if plan.on_miss is OnMiss.SIMULATE
                    else None
                ),
                record_hint=plan.record_command,
            )
        background = None
        if pages is not None and plan.uses_background:
            background = first_page_background(plan, store, pages)
        engines = engine_parts(plan, pages=pages, background=background)
        search = None
        if plan.search_provider is not None:
            search = user_provider(*plan.search_provider, collection)
        users = plan_users(plan)
        _WORKER = ReplayWorker(plan, query_set, store, engines, users, pages, search)
    return _WORKER


def search_store(query_set: QuerySet, on_miss: OnMiss, record_hint: str) -> CassetteStore:
    """The query set's search cassettes; with ``on_miss`` simulate, the collection's
    simulator answers what they miss."""
    collection = query_set.collection
    simulate = on_miss is OnMiss.SIMULATE
    return CassetteStore(
        query_set.cassettes,
        on_miss=on_miss,
        fallback=(lambda: SimulatorTransport(BraveSimulator(collection))) if simulate else None,
        record_hint=record_hint,
    )


EngineParts = list[tuple[EngineConfig, Ranker, Ranker, Refiner]]


def engine_parts(
    plan: RunPlan, *, pages: PageSource | None = None, background: Background | None = None
) -> EngineParts:
    """Each engine config with its ranker, its no-feedback control and its refiner; those
    that read pages read them from ``pages``, those with ``idf=background`` take it from
    ``background``."""
    return [
        (
            e,
            make_ranker(e, pages=pages, background=background),
            make_ranker(e, feedback=False, pages=pages, background=background),
            make_refiner(e, pages=pages, background=background),
        )
        for e in plan.engines
    ]


def first_page_background(plan: RunPlan, store: CassetteStore, pages: PageSource) -> Background:
    """The background sample of ``idf=background``: the pages behind the first results
    (``experiment.depth`` of them) of every judged query of the query set, whatever
    ``experiment.queries`` keeps (so a query's numbers do not depend on how many run),
    replayed from ``store``; built before any query's episodes, so no query's request
    counts include it."""
    queries = load_query_set(plan.query_set, limit=None).queries

    def first_page(query_id: str, query: str) -> list[Evidence]:
        with ReplayClient(transport=store.transport(query_id)) as client:
            try:
                return replay_provider(client).search(query, limit=plan.depth)
            except SkippedRequest:
                return []

    return query_set_background(queries, first_page, pages)


def plan_users(plan: RunPlan) -> list[tuple[str, UserPolicy]]:
    """The simulated users, seeded with the run's seed plus their own (a run over several
    seeds: with the seed of each user's label, :meth:`RunPlan.user_seed`); a click model
    without a ``top_grade`` reads grades on the scale of the query set's qrels (its highest
    grade)."""
    users: list[tuple[str, UserPolicy]] = []
    for name, conf in plan.users.items():
        chosen = {**conf, "seed": int(conf.get("seed", 0)) + plan.user_seed(name)}
        if "top_grade" in user_params(str(conf["kind"])) and conf.get("top_grade") is None:
            chosen["top_grade"] = _top_grade(plan)
        users.append((name, make_user(name, chosen)))
    return users


def _top_grade(plan: RunPlan) -> int:
    """The highest grade in the qrels of the whole collection (not only the run's queries),
    ``query_set.qrels``'s judgments included (:attr:`QuerySet.top_grade`)."""
    return load_query_set(plan.query_set, limit=plan.query_limit).top_grade


def query_episodes(
    engines: EngineParts,
    users: Sequence[tuple[str, UserPolicy]],
    plan: RunPlan,
    query_id: str,
    query: str,
    judgments: Judgments,
    provider: SearchProvider,
    initial: Sequence[Evidence],
    deep: Sequence[Evidence] | None,
    *,
    rounds: int | None = None,
    modes: Sequence[str] | None = None,
    memo: QueryMemo | None = None,
) -> Iterator[tuple[EngineConfig, str, EpisodeResult]]:
    """Every (engine config, user) episode of one query, in plan order
    (:func:`~evidence_bench.experiment.episodes.plan_episodes`); they share the steps whose
    inputs coincide (:class:`~evidence_bench.experiment.memo.QueryMemo`: ``memo``, or a new
    one). A :class:`MemoProvider` is asked each distinct search once, its answers numbered
    in the order one episode after another asks them."""
    if memo is None:
        memo = QueryMemo(query, plan.measures)
    if memo.measures != tuple(plan.measures):
        raise ValueError("query_episodes: the memo was made for other measures")
    shared = [
        (engine, memo.ranker(ranker), memo.ranker(control), memo.refiner(refiner))
        for engine, ranker, control, refiner in engines
    ]
    judged = [(name, memo.user(name, user)) for name, user in users]
    repeats = isinstance(provider, MemoProvider)
    asked = provider.asked() if isinstance(provider, MemoProvider) else []
    planned = plan_episodes(
        memo=memo,
        query_id=query_id,
        query=query,
        initial=initial,
        deep=deep,
        provider=provider,
        engines=[(ranker, control, refiner) for _, ranker, control, refiner in shared],
        users=[(user, plan.user_seed(name), plan.episode_policy(name)) for name, user in judged],
        judgments=judgments,
        modes=plan.modes if modes is None else modes,
        rounds=plan.rounds if rounds is None else rounds,
        depth=plan.depth,
        repeats=repeats,
    )
    if isinstance(provider, MemoProvider):
        provider.reorder([*asked, *planned.searches])
    results = iter(planned.episodes)
    for engine, *_ in shared:
        for user_name, _ in judged:
            yield engine, user_name, next(results)


@dataclass
class ReplayedQuery:
    """One query's judgments and its provider's first answers, asked once and reused by
    every episode of the query (``provider`` remembers every later answer too)."""

    query_id: str
    query: str
    judgments: Judgments
    provider: MemoProvider
    initial: list[Evidence]
    #: the provider's list deepened for the equal-depth controls; None: replay.on_miss=skip
    deep: list[Evidence] | None
    #: as in QueryOutput: the first page came from the cassette, and its judged results
    replayed_initial: bool = False
    judged_hits: int = 0


def replay_query(worker: ReplayWorker, query_id: str, client: httpx.Client) -> ReplayedQuery:
    """Ask the initial and the deepened search of ``query_id`` through ``client`` (a replay
    transport of the worker's cassette store), or of the user's search provider."""
    plan = worker.plan
    query = worker.query_set.queries[query_id]
    grades = worker.query_set.qrels[query_id]
    provider = MemoProvider(worker.search or replay_provider(client))
    replayed = worker.store.counts["replayed"]
    try:
        initial = provider.search(query, limit=plan.depth)
    except SkippedRequest:  # every stage starts from it: nothing of the query can be run
        raise worker.store.missing(
            query_id, query, "its first page", ": replay.on_miss=skip leaves out later searches"
        ) from None
    from_cassette = worker.store.counts["replayed"] > replayed
    try:
        deep: list[Evidence] | None = provider.search(query, limit=deep_limit(plan))
    except SkippedRequest:
        deep = None  # replay.on_miss=skip: the equal-depth stages are left out
    return ReplayedQuery(
        query_id,
        query,
        Judgments(grades, prepare(grades)),
        provider,
        initial,
        deep,
        replayed_initial=from_cassette,
        judged_hits=sum(item.key in grades for item in initial) if from_cassette else 0,
    )


def query_output(
    worker: ReplayWorker, replayed: ReplayedQuery, engines: EngineParts, plan: RunPlan
) -> QueryOutput:
    """Every (engine, user) episode of one replayed query as rows; ``plan`` gives the
    rounds, modes and measures (the worker's own, or fewer). ``requests`` is left empty:
    the caller counts what its store answered.

    The episodes share one memo, so their scores are ids of the query's distinct
    evaluations (:attr:`QueryMemo.values`), sent once each."""
    query_id, query = replayed.query_id, replayed.query
    doc_id = _doc_ids(worker.query_set.collection.doc_id_for)
    out = QueryOutput(query_id)
    out.replayed_initial, out.judged_hits = replayed.replayed_initial, replayed.judged_hits
    memo = QueryMemo(query, plan.measures)
    episodes = query_episodes(
        engines,
        worker.users,
        plan,
        query_id,
        query,
        replayed.judgments,
        replayed.provider,
        replayed.initial,
        replayed.deep,
        memo=memo,
    )
    rows = QueryRowsBuilder(query_id)
    shared = _SharedRounds(rows, doc_id)
    values = np.empty((0, len(memo.measures)))  # a query without episodes scores nothing
    for engine, user_name, result in episodes:
        assert isinstance(result, PlannedEpisode)
        pair = rows.pair(engine.config_id, user_name)
        out.skipped_expands += result.skipped_expand
        out.no_usable_feedback += result.no_usable_feedback
        rows.scores(pair, result.scored, result.evaluations)
        values = result.values  # shared by the query's episodes
        if result.rounds:
            rows.add_episode(pair, query, shared.entries(result))
        else:  # an episode without rounds keeps a row (round 0, no detail)
            rows.episode(pair, query, [], {})
        for (round_, stage), keys in result.rankings.items():
            rows.run(pair, round_, stage, keys)
    out.rows = rows.build(memo.names, values)
    for answer in replayed.provider.answers():
        for item in answer:
            out.documents.setdefault(item.key, item)
    out.missing_dates = sum(1 for item in replayed.initial if item.page_age is None)
    return out


class _SharedRounds:
    """The builder's entries of planned episodes' rounds: a round record, its marks and its
    ranking lists are shared by the episodes where they coincide
    (:class:`~evidence_bench.experiment.episodes.PlannedEpisode`), so each is converted to
    doc ids and numbered once, in the order :meth:`QueryRowsBuilder.episode` would number
    it. Every object whose id is a key is kept alive here."""

    def __init__(self, rows: QueryRowsBuilder, doc_id: Callable[[str], str]) -> None:
        self.rows, self.doc_id = rows, doc_id
        self._entries: dict[tuple[int, int], tuple[EpisodeRound, object, object]] = {}
        self._lists: dict[int, tuple[int | None, list[str]]] = {}
        self._marks: dict[int, tuple[int, list[Any]]] = {}
        self._details: dict[tuple[Any, ...], tuple[str, object]] = {}
        self._doc_codes: dict[str, int] = {}
        self._mark_texts: dict[int, tuple[str, object]] = {}
        self._quoted: dict[str, str] = {}

    def entries(self, result: PlannedEpisode) -> list[EpisodeRound]:
        found = []
        entries = self._entries
        for record, marks in zip(result.rounds, result.round_marks, strict=True):
            entry = entries.get((id(record), id(marks)))
            if entry is None:
                entry = entries[(id(record), id(marks))] = (
                    self._entry(record, marks),
                    record,
                    marks,
                )
            found.append(entry[0])
        return found

    def _entry(self, record: Mapping[str, Any], marks: list[Any]) -> EpisodeRound:
        rows = self.rows
        # the detail is the record but its lists: its marks (a list shared by the records
        # of one user's round) and its expansion's fields
        weights = record.get("term_weights")
        key = (
            id(record["marks"]),
            record["refined_query"],
            tuple(record["added_terms"]),
            record["added"],
            None if weights is None else tuple(map(tuple, weights)),
            "breakdown" in record,
        )
        found = None if key[-1] else self._details.get(key)
        if found is None:
            found = self._details[key] = (self._detail(record), record["marks"])
        detail = found[0]
        before, rerank, expand = (self._ranking(record[k]) for k in _LISTS)
        mark_set = self._marks.get(id(marks))
        if mark_set is None:
            doc_id = self.doc_id
            rows_of = [(doc_id(key), label, key, rank) for _, key, label, rank in marks]
            mark_set = self._marks[id(marks)] = (rows.mark_set(rows_of), marks)
        return (int(record["round"]), detail, mark_set[0], before, rerank, expand)

    def _detail(self, record: Mapping[str, Any]) -> str:
        """:meth:`QueryRowsBuilder.detail` of the record as ``episodes.jsonl`` holds it: the
        JSON text ``json.dumps(..., ensure_ascii=False, sort_keys=True)`` gives, put together
        from its fields' (a round's marks, shared by many records, converted once)."""
        rows = self.rows
        names = record.keys()
        if names != _PLAIN and names != _WEIGHED:  # a breakdown: converted as it is
            return rows.detail(_episode_round(record, self.doc_id))
        marks = record["marks"]
        found = self._mark_texts.get(id(marks))
        if found is None:
            # [{"doc_id": ..., "label": ...}, ...], each string quoted as json.dumps quotes
            # it (ensure_ascii=False), the doc ids once each
            quoted, text = self._quoted, _quote
            for key, _ in marks:
                if key not in quoted:
                    quoted[key] = text(self.doc_id(key))
            listed = ", ".join(
                f'{{"doc_id": {quoted[key]}, "label": {text(label)}}}' for key, label in marks
            )
            found = self._mark_texts[id(marks)] = (f"[{listed}]", marks)
        parts = [
            f'"added": {_json(record["added"])}',
            f'"added_terms": {_json(record["added_terms"])}',
            f'"marks": {found[0]}',
            f'"refined_query": {_json(record["refined_query"])}',
        ]
        if names == _WEIGHED:
            weights = json.dumps(record["term_weights"], ensure_ascii=False, sort_keys=True)
            parts.append(f'"term_weights": {weights}')
        return rows.detail_text("{" + ", ".join(parts) + "}")

    def _ranking(self, keys: list[str] | None) -> int | None:
        if keys is None:
            return None
        found = self._lists.get(id(keys))
        if found is None:
            # each key's doc id as the builder numbers it, looked up once per key
            known = self._doc_codes
            numbers: list[int | None] = list(map(known.get, keys))
            if None in numbers:
                for at, number in enumerate(numbers):
                    if number is None:
                        key = keys[at]
                        numbers[at] = known[key] = self.rows.codes([self.doc_id(key)])[0]
            ranking = self.rows.coded_ranking(tuple(numbers))  # type: ignore[arg-type]
            found = self._lists[id(keys)] = (ranking, keys)
        return found[0]


#: The lists of a round record that the builder stores as ranking ids.
_LISTS = ("before", "after_rerank", "after_expand")
#: A str as JSON text, as ``json.dumps(..., ensure_ascii=False)`` writes it.
_quote: Callable[[str], str] = json.encoder.encode_basestring


def _json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)`` of a round record's field, written directly
    where it is an int, a str, None or a list of str (what json.dumps writes for them)."""
    kind = type(value)
    if kind is str:
        return _quote(value)
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is list and all(type(item) is str for item in value):
        return "[" + ", ".join(map(_quote, value)) + "]"
    return json.dumps(value, ensure_ascii=False)


#: The fields of a planned round record (_SharedRounds._detail), with term weights or not.
_PLAIN = frozenset({"round", "marks", *_LISTS, "refined_query", "added_terms", "added"})
_WEIGHED = _PLAIN | {"term_weights"}


def _doc_ids(lookup: Callable[[str], str | None]) -> Callable[[str], str]:
    """``lookup(key) or key``, each key's looked up once (a query's episodes show the same
    documents over and over)."""
    known: dict[str, str] = {}

    def doc_id(key: str) -> str:
        found = known.get(key)
        if found is None:
            found = known[key] = lookup(key) or key
        return found

    return doc_id


def _run_query(plan: RunPlan, query_id: str) -> QueryOutput:
    worker = replay_worker(plan)
    before = Counter(worker.store.counts)
    with ReplayClient(transport=worker.store.transport(query_id)) as client:
        out = query_output(worker, replay_query(worker, query_id, client), worker.engines, plan)
    out.requests = Counter(worker.store.counts) - before
    return out


def _episode_round(record: Mapping[str, Any], doc_id: Any) -> dict[str, Any]:
    """A round record as ``episodes.jsonl`` holds it (keys as doc ids) but its rankings:
    the builder's :meth:`~QueryRowsBuilder.detail` of it."""
    extra: dict[str, Any] = {}
    if "term_weights" in record:
        extra["term_weights"] = record["term_weights"]
    if "breakdown" in record:
        extra["breakdown"] = [
            {"doc_id": doc_id(row["url"]) or row["url"], **{k: row[k] for k in "RFTDS"}}
            for row in record["breakdown"]
        ]
    return {
        **extra,
        "round": record["round"],
        "refined_query": record["refined_query"],
        "added_terms": record["added_terms"],
        "added": record["added"],
        "marks": [{"doc_id": doc_id(key) or key, "label": label} for key, label in record["marks"]],
    }


_PLAN: RunPlan | None = None
#: The documents this worker has sent the parent (:func:`_call`).
_SENT: set[str] = set()


def _start(plan: RunPlan) -> None:
    """Pool initializer: the plan arrives once per process, the tasks carry query ids only."""
    global _PLAN
    _PLAN = plan
    _SENT.clear()


def _call_many(query_ids: Sequence[str]) -> list[QueryOutput]:
    """Consecutive queries' outputs, sent to the parent as one message."""
    return [_call(query_id) for query_id in query_ids]


#: Queries a message while many remain (:func:`_chunks`).
_CHUNK = 3


def _chunks(query_ids: Sequence[str], count: int) -> list[Sequence[str]]:
    """``query_ids`` in order as the tasks of ``count`` workers: :data:`_CHUNK` queries a
    task, so the parent reads, unpickles and hands on a third of the messages while both
    workers run, but one query a task for the last ``2 * count * _CHUNK``, so neither waits
    long for the other's last task."""
    head = max(0, len(query_ids) - 2 * count * _CHUNK)
    chunks = [query_ids[at : min(at + _CHUNK, head)] for at in range(0, head, _CHUNK)]
    return [*chunks, *([query_id] for query_id in query_ids[head:])]


def _call(query_id: str) -> QueryOutput:
    """One query's output as a worker sends it: its documents but those this worker sent
    with an earlier query. The parent keeps the first of each document in query order, and
    a worker's queries come in that order, so the parent holds those already; most of a
    query's documents were shown by an earlier one (Cranfield: 1,385 distinct of 15,748)."""
    assert _PLAN is not None
    out = _guarded(_PLAN, query_id)
    sent = _SENT
    out.documents = {key: item for key, item in out.documents.items() if key not in sent}
    sent.update(out.documents)
    return out


def _guarded(plan: RunPlan, query_id: str) -> QueryOutput:
    """One query's episodes; a failure becomes an error that names the query and that a
    worker can send to the parent."""
    try:
        return _run_query(plan, query_id)
    except Exception as exc:
        if isinstance(exc, RequestError | ResponseFormatError):
            # an answer replayed (or simulated) for this query: name the query and cassette
            cassette = cassette_path(replay_worker(plan).query_set.cassettes, query_id)
            exc.args = (f"query {query_id!r} ({cassette}): {exc}",)
        portable = _portable(exc, query_id)
        if portable is exc:
            raise
        raise portable from exc
    finally:
        _forget_query()


def _forget_query() -> None:
    """Drop what only one query's episodes reuse: its pools' tf-idf arrays
    (:func:`~evidence_bench.engine.ranking.pool_matrix` keeps the last 1,024, ~70 KB each,
    and no other query has the same candidates; its memo holds them meanwhile). Kept, they
    were most of a worker's memory by its hundredth query (~150 MB)."""
    pool_matrix.cache_clear()


def _portable(exc: Exception, query_id: str) -> EvidenceBenchError:
    """``exc`` itself when it is the package's and survives pickling, else a WorkerError
    naming the query, the error and where it was raised."""
    if isinstance(exc, EvidenceBenchError):
        try:
            pickle.loads(pickle.dumps(exc))
            return exc
        except Exception:  # an attribute that cannot be pickled: send its message only
            pass
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return WorkerError(f"query {query_id!r} failed: {type(exc).__name__}: {exc}{where}")


def _share(plan: RunPlan) -> None:
    """Build what every worker needs before forking them: the query set, the cassette store,
    the engines and users (:func:`replay_worker`) and the simulator's index. The workers
    then share these pages copy-on-write instead of each building its own (the index alone
    is ~0.3 s of CPU and ~16 MB for Cranfield).

    Only a head start: what fails here is left for the worker that meets it to report, naming
    its query, as it would without it."""
    try:
        worker = replay_worker(plan)
        if plan.on_miss is OnMiss.SIMULATE:
            prepare_index(worker.query_set.collection)
    except Exception:  # reported by the worker that meets it
        pass


def _forget_worker() -> None:
    """Drop this process's worker (:func:`replay_worker`: its cassettes, engines and users)
    and the simulator's index: the episodes' alone, once they are done here or forked."""
    global _WORKER
    _WORKER = None
    forget_indexes()


def execute(plan: RunPlan, query_ids: Sequence[str], *, workers: int = 0) -> Iterator[QueryOutput]:
    """Run every query's episodes, yielding results in ``query_ids`` order.

    What every query needs (:func:`_share`: the query set, cassettes, engines, users and
    the simulator's index) is built here, before the first result is asked for, whatever
    the number of workers: the episodes then start from the same state with one worker or
    several, and a caller timing the iteration times the episodes alone.

    With several workers, they are forked before anything here starts a thread (the
    caller's progress bar disables tqdm's monitor thread for the same reason; a fork-context
    ProcessPoolExecutor starts all its processes before its manager thread). On the first
    failure the queries not yet started are cancelled and the error is raised.

    A result's ``documents`` hold what its query's searches answered, but a worker sends
    each document once, with the first of its queries that shows it: keeping the first of
    each key, in ``query_ids`` order, gives every document as one process would.
    """
    count = workers or os.cpu_count() or 1
    count = max(1, min(count, len(query_ids)))
    _share(plan)
    return _episodes(plan, query_ids, count)


def _episodes(plan: RunPlan, query_ids: Sequence[str], count: int) -> Iterator[QueryOutput]:
    """:func:`execute`'s results, from this process (``count`` 1) or ``count`` workers."""
    if count == 1:
        try:
            yield from (_guarded(plan, query_id) for query_id in query_ids)
        finally:
            # kept, they stayed beside the tail's frames (a sweep's workers=1 run peaked at
            # 517 MB, 472 MB without them)
            _forget_worker()
            release_memory()
        return
    # what the parent holds now, out of the collector's view in every worker: their
    # collections no longer walk (and copy) the parent's pages. Kept under issue 27's rule:
    # benchmarks/bench_ab.py -- run +experiment=rocchio_sweep workers=2 prints it
    gc.freeze()
    pool = ProcessPoolExecutor(
        count,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start,
        initargs=(plan,),
    )
    try:
        try:
            # the first task forks them all
            results = pool.map(_call_many, _chunks(query_ids, count))
        finally:
            # the parent replays nothing itself: what _share built is the workers' alone
            # (freed here, the pages stay theirs)
            _forget_worker()
        for outputs in results:
            yield from outputs
    except BrokenProcessPool as exc:
        raise WorkerError(
            f"a worker process stopped unexpectedly (killed, or out of memory?): {exc}"
        ) from exc
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
