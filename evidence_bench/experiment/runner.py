"""The experiment runner: plan a run from its config, replay every episode, collect rows.

The work is split by query: one task replays one query's cassette for every engine config
and user, so each cassette is parsed once per process, and tasks spread over the cores.
Results come back in query order and every random draw is seeded per (seed, query, round,
document), so the numbers do not depend on the number of workers.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import httpx

from evidence_bench.engine.base import Ranker, Refiner, SearchProvider
from evidence_bench.errors import ConfigurationError
from evidence_bench.evaluation.measures import Measure, parse_measure, prepare
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.components import (
    RANKERS,
    EngineConfig,
    engine_config,
    make_ranker,
    make_refiner,
    make_user,
)
from evidence_bench.experiment.config import RankerConf, RefinerConf
from evidence_bench.experiment.episode import EpisodeResult, Judgments, run_episode
from evidence_bench.experiment.queryset import QuerySet, load_query_set
from evidence_bench.fixtures.cassettes import (
    REPLAY_BASE_URL,
    CassetteStore,
    OnMiss,
    SkippedRequest,
)
from evidence_bench.providers.brave import BraveProvider, RetryPolicy
from evidence_bench.simulation.simulator import BraveSimulator, SimulatorTransport
from evidence_bench.simulation.users import UserPolicy

__all__ = [
    "EVAL_MODES",
    "MemoProvider",
    "QueryOutput",
    "RunPlan",
    "deep_limit",
    "engine_parts",
    "execute",
    "plan_run",
    "plan_users",
    "query_episodes",
    "record_command",
]

EVAL_MODES = ("full", "residual", "frozen")


@dataclass(frozen=True)
class RunPlan:
    """Everything a run does, validated, in plain values."""

    experiment: str
    query_set: Mapping[str, Any]
    query_limit: int | None
    engines: tuple[EngineConfig, ...]
    users: Mapping[str, Mapping[str, Any]]
    measures: tuple[Measure, ...]
    modes: tuple[str, ...]
    rounds: int
    depth: int
    on_miss: OnMiss
    seed: int
    swept: tuple[str, ...] = ()
    record_command: str = "python -m evidence_bench record ..."


@dataclass
class QueryOutput:
    """One query's rows, for every engine config and user."""

    query_id: str
    scores: list[tuple[str, str, str, int, str, str, str, float]] = field(default_factory=list)
    feedback: list[tuple[str, str, str, int, str, str, str, int]] = field(default_factory=list)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    rankings: dict[tuple[str, str, int, str], list[str]] = field(default_factory=dict)
    documents: dict[str, Evidence] = field(default_factory=dict)
    requests: Counter[str] = field(default_factory=Counter)
    skipped_expands: int = 0
    no_usable_feedback: int = 0
    missing_dates: int = 0


def _choice(key: str, value: str, valid: Sequence[str]) -> str:
    if value not in valid:
        raise ConfigurationError(f"{key}={value!r} is not valid (valid: {', '.join(valid)})")
    return value


#: Overrides that do not change what an episode sends, left out of the record command.
_NOT_RECORDED = ("runs_dir=", "progress=", "report=", "workers=", "replay.", "hydra", "record_")


def record_command(cfg: Mapping[str, Any], overrides: Sequence[str] | None) -> str:
    """The ``record`` command that would add a run's missing requests to its cassettes:
    the run's own overrides (or, without them, its experiment and query set), every round."""
    if overrides is None:
        query_set = cfg["query_set"]
        overrides = [f"+experiment={cfg['experiment']['name']}"]
        if query_set["name"] in ("cranfield", "cacm"):
            overrides.append(f"query_set={query_set['name']}")
        else:
            overrides += [
                "query_set=beir",
                f"query_set.name={query_set['name']}",
                f"query_set.path={query_set['path']}",
                f"query_set.cassettes={query_set['cassettes']}",
            ]
    kept = [o for o in overrides if not o.lstrip("+~").startswith(_NOT_RECORDED)]
    return " ".join(["python -m evidence_bench record", *kept, "record_rounds=0"])


def plan_run(cfg: Mapping[str, Any], overrides: Sequence[str] | None = None) -> RunPlan:
    """Validate a resolved config (a plain mapping) into a :class:`RunPlan`.

    ``overrides``: the command line's, so a replay miss can name the ``record`` command.
    """
    experiment = cfg["experiment"]
    if experiment.get("name") in (None, "???"):
        raise ConfigurationError(
            "no experiment chosen: add +experiment=NAME (see conf/experiment/)"
        )
    measures = tuple(parse_measure(name) for name in cfg["eval"]["measures"])
    if not measures:
        raise ConfigurationError("eval.measures is empty")
    modes = tuple(_choice("eval.modes", str(mode), EVAL_MODES) for mode in cfg["eval"]["modes"])
    _choice("eval.primary_mode", str(cfg["eval"]["primary_mode"]), modes)
    primary = str(parse_measure(str(cfg["eval"]["primary_measure"])))
    if primary not in {str(m) for m in measures}:
        raise ConfigurationError(f"eval.primary_measure={primary!r} is not in eval.measures")
    if not cfg.get("policies"):
        raise ConfigurationError(
            "the experiment names no user: add policies, e.g. +policy@policies.oracle=oracle"
        )
    users = {name: dict(conf) for name, conf in cfg["policies"].items()}
    for name, conf in users.items():
        make_user(name, conf)  # fails early, naming the policy
    rounds = int(experiment["rounds"])
    depth = int(experiment["depth"])
    if rounds < 1:
        raise ConfigurationError(f"experiment.rounds={rounds} must be at least 1")
    if not 1 <= depth <= 200:
        raise ConfigurationError(f"experiment.depth={depth} must be between 1 and 200")

    engines = _engines(cfg, experiment)
    source = str(cfg["query_set"].get("source", "collection"))
    default_miss = "simulate" if source == "collection" else "error"
    on_miss = OnMiss(
        _choice(
            "replay.on_miss",
            str(cfg.get("replay", {}).get("on_miss") or default_miss),
            [m.value for m in OnMiss],
        )
    )
    if on_miss is OnMiss.SIMULATE and source != "collection":
        raise ConfigurationError(
            "replay.on_miss=simulate needs a collection-backed query set "
            f"(query_set.source={source!r})"
        )
    queries = experiment.get("queries")
    if queries is not None and int(queries) < 1:
        raise ConfigurationError(f"experiment.queries={queries} must be at least 1 (or null: all)")
    return RunPlan(
        experiment=str(experiment["name"]),
        query_set=dict(cfg["query_set"]),
        query_limit=int(queries) if queries is not None else None,
        engines=engines,
        users=users,
        measures=measures,
        modes=modes,
        rounds=rounds,
        depth=depth,
        on_miss=on_miss,
        seed=int(cfg.get("seed", 0)),
        swept=tuple(
            key for key, values in (experiment.get("grid") or {}).items() if len(values) > 1
        ),
        record_command=record_command(cfg, overrides),
    )


def deep_limit(plan: RunPlan) -> int:
    """How deep the equal-depth control fetches: as long as R expansions can make a list."""
    return min(plan.depth * (plan.rounds + 1), 200)


_SCHEMAS = {"ranker": RankerConf, "refiner": RefinerConf}


def _engines(cfg: Mapping[str, Any], experiment: Mapping[str, Any]) -> tuple[EngineConfig, ...]:
    """One engine config per ``experiment.configs`` entry (or the base config) per grid point."""
    schemas = {part: [f.name for f in fields(schema)] for part, schema in _SCHEMAS.items()}
    grid = {str(k): list(v) for k, v in (experiment.get("grid") or {}).items()}
    for key, values in grid.items():
        if key not in schemas["ranker"]:
            valid = ", ".join(schemas["ranker"])
            raise ConfigurationError(f"experiment.grid.{key}: not a ranker setting ({valid})")
        if not values:
            raise ConfigurationError(f"experiment.grid.{key} is empty")
    engines: list[EngineConfig] = []
    for position, entry in enumerate(experiment.get("configs") or [{}]):
        where = f"experiment.configs[{position}]"
        for part, overrides in entry.items():
            if part not in schemas:
                raise ConfigurationError(f"{where}.{part}: not valid (valid: ranker, refiner)")
            for key in overrides:
                if key not in schemas[part]:
                    valid = ", ".join(schemas[part])
                    raise ConfigurationError(f"{where}.{part}.{key}: unknown key ({valid})")
        ranker = {**cfg["ranker"], **entry.get("ranker", {})}
        refiner = {**cfg["refiner"], **entry.get("refiner", {})}
        takes = RANKERS[ranker["name"]].params if ranker["name"] in RANKERS else ()
        for key in grid:
            if key not in takes:
                raise ConfigurationError(
                    f"experiment.grid.{key}: ranker {ranker['name']!r} has no parameter "
                    f"{key!r} (valid: {', '.join(takes) or 'none'})"
                )
        for point_values in itertools.product(*grid.values()):
            point = {**ranker, **dict(zip(grid, point_values, strict=True))}
            analyzer = dict(cfg.get("analyzer") or {})
            engines.append(engine_config(f"c{len(engines):02d}", point, refiner, analyzer))
    return tuple(engines)


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


@dataclass
class _Worker:
    """What one process builds once and reuses for all its queries."""

    plan: RunPlan
    query_set: QuerySet
    store: CassetteStore
    engines: EngineParts
    users: list[tuple[str, UserPolicy]]


_WORKER: _Worker | None = None


def _worker(plan: RunPlan) -> _Worker:
    global _WORKER
    if _WORKER is None or _WORKER.plan != plan:  # built once per process and plan
        query_set = load_query_set(plan.query_set, limit=plan.query_limit)
        collection = query_set.collection
        store = CassetteStore(
            query_set.cassettes,
            on_miss=plan.on_miss,
            fallback=(
                (lambda: SimulatorTransport(BraveSimulator(collection)))
                if plan.on_miss is OnMiss.SIMULATE
                else None
            ),
            record_hint=plan.record_command,
        )
        _WORKER = _Worker(plan, query_set, store, engine_parts(plan), plan_users(plan))
    return _WORKER


EngineParts = list[tuple[EngineConfig, Ranker, Ranker, Refiner]]


def engine_parts(plan: RunPlan) -> EngineParts:
    """Each engine config with its ranker, its no-feedback control and its refiner."""
    return [
        (e, make_ranker(e), make_ranker(e, feedback=False), make_refiner(e)) for e in plan.engines
    ]


def plan_users(plan: RunPlan) -> list[tuple[str, UserPolicy]]:
    """The simulated users, seeded with the run's seed plus their own."""
    return [
        (name, make_user(name, {**conf, "seed": int(conf.get("seed", 0)) + plan.seed}))
        for name, conf in plan.users.items()
    ]


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
) -> Iterator[tuple[EngineConfig, str, EpisodeResult]]:
    """Every (engine config, user) episode of one query, in plan order."""
    for engine, ranker, control, refiner in engines:
        for user_name, user in users:
            yield (
                engine,
                user_name,
                run_episode(
                    query_id=query_id,
                    query=query,
                    initial=initial,
                    deep=deep,
                    provider=provider,
                    ranker=ranker,
                    control=control,
                    refiner=refiner,
                    user=user,
                    judgments=judgments,
                    measures=plan.measures,
                    modes=plan.modes if modes is None else modes,
                    rounds=plan.rounds if rounds is None else rounds,
                    depth=plan.depth,
                ),
            )


def _run_query(plan: RunPlan, query_id: str) -> QueryOutput:
    worker = _worker(plan)
    query = worker.query_set.queries[query_id]
    grades = worker.query_set.qrels[query_id]
    judgments = Judgments(grades, prepare(grades))
    doc_id = worker.query_set.collection.doc_id_for
    out = QueryOutput(query_id)
    before = Counter(worker.store.counts)
    with httpx.Client(transport=worker.store.transport(query_id)) as client:
        provider = MemoProvider(
            BraveProvider(
                "replay",
                base_url=REPLAY_BASE_URL,
                http_client=client,
                retry=RetryPolicy(attempts=1),
            )
        )
        initial = provider.search(query, limit=plan.depth)
        try:
            deep: list[Evidence] | None = provider.search(query, limit=deep_limit(plan))
        except SkippedRequest:
            deep = None  # replay.on_miss=skip: the equal-depth stages are left out
        episodes = query_episodes(
            worker.engines, worker.users, plan, query_id, query, judgments, provider, initial, deep
        )
        for engine, user_name, result in episodes:
            cid = engine.config_id
            out.skipped_expands += result.skipped_expand
            out.no_usable_feedback += result.no_usable_feedback
            for round_, stage, mode, measure, value in result.scores:
                out.scores.append((cid, user_name, query_id, round_, stage, mode, measure, value))
            for round_, key, label, rank in result.feedback:
                row = (cid, user_name, query_id, round_, doc_id(key) or key, label, key, rank)
                out.feedback.append(row)
            for (round_, stage), keys in result.rankings.items():
                out.rankings[(cid, user_name, round_, stage)] = keys
            out.episodes.append(
                {
                    "config_id": cid,
                    "policy": user_name,
                    "query_id": query_id,
                    "query": query,
                    "rounds": [_episode_round(r, doc_id) for r in result.rounds],
                }
            )
        for answer in provider.answers():
            for item in answer:
                out.documents.setdefault(item.key, item)
        out.missing_dates = sum(1 for item in initial if item.page_age is None)
    out.requests = Counter(worker.store.counts) - before
    return out


def _episode_round(record: Mapping[str, Any], doc_id: Any) -> dict[str, Any]:
    def ids(keys: Sequence[str] | None) -> list[str] | None:
        return None if keys is None else [doc_id(key) or key for key in keys]

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
        "before": ids(record["before"]),
        "after_rerank": ids(record["after_rerank"]),
        "after_expand": ids(record["after_expand"]),
        "marks": [{"doc_id": doc_id(key) or key, "label": label} for key, label in record["marks"]],
    }


_PLAN: RunPlan | None = None


def _start(plan: RunPlan) -> None:
    """Pool initializer: the plan arrives once per process, the tasks carry query ids only."""
    global _PLAN
    _PLAN = plan


def _call(query_id: str) -> QueryOutput:
    assert _PLAN is not None
    return _run_query(_PLAN, query_id)


def execute(plan: RunPlan, query_ids: Sequence[str], *, workers: int = 0) -> Iterator[QueryOutput]:
    """Run every query's episodes, yielding results in ``query_ids`` order.

    Worker processes are forked before anything here starts a thread (the caller's
    progress bar disables tqdm's monitor thread for the same reason).
    """
    count = workers or os.cpu_count() or 1
    count = max(1, min(count, len(query_ids)))
    if count == 1:
        yield from (_run_query(plan, query_id) for query_id in query_ids)
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(count, initializer=_start, initargs=(plan,)) as pool:
        yield from pool.imap(_call, query_ids, chunksize=1)
