"""Scoring engine configs on queries by replaying their episodes, for the tuning search.

Each query's provider answers are asked once per run and remembered; queries are sharded
over worker processes by position, each replayed by one process; each (config, query)
value of the objective is cached. Training episodes are scored in the objective's mode and
measure only; :meth:`EpisodeScorer.outputs` replays full episodes for the run directory.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import pickle
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from typing import Any

import httpx

from evidence_bench.errors import WorkerError
from evidence_bench.experiment.components import EngineConfig
from evidence_bench.experiment.plan import RunPlan
from evidence_bench.experiment.runner import (
    EngineParts,
    QueryOutput,
    ReplayedQuery,
    engine_parts,
    query_output,
    replay_query,
    replay_worker,
)

__all__ = ["EpisodeScorer", "Objective"]


@dataclass(frozen=True, slots=True)
class Objective:
    """What a trial maximizes per query: ``stage`` − ``control`` of ``measure`` at
    ``round`` under ``mode`` (feedback's attributable gain,
    :data:`evidence_bench.evaluation.attribution.BASELINES`)."""

    stage: str
    control: str
    round: int
    mode: str
    measure: str

    def values(self, scores: Sequence[tuple[Any, ...]]) -> dict[str, dict[str, float]]:
        """config_id -> {stage, control} values in this objective's cell, from score rows
        (config_id, policy, query_id, round, stage, mode, measure, value) of one query."""
        found: dict[str, dict[str, float]] = {}
        for config_id, _policy, _query, round_, stage, mode, measure, value in scores:
            cell = (round_, mode, measure) == (self.round, self.mode, self.measure)
            if cell and stage in (self.stage, self.control):
                found.setdefault(str(config_id), {})[stage] = float(value)
        return found

    def gain(self, cell: Mapping[str, float]) -> float | None:
        """stage − control, or None where either is missing (the query left the comparison)."""
        if self.stage in cell and self.control in cell:
            return cell[self.stage] - cell[self.control]
        return None


#: A request to a shard: ("gains", engine, objective, query ids) or ("outputs", [(query id,
#: engines)]); the answer is (result, the cassette store's request counts it added).
_Request = tuple[Any, ...]


class _Replayer:
    """One process's replayed queries, kept for the whole run."""

    def __init__(self, plan: RunPlan) -> None:
        self.plan = plan
        self.worker = replay_worker(plan)
        self._clients: list[httpx.Client] = []
        self._queries: dict[str, ReplayedQuery] = {}
        self._parts: dict[tuple[EngineConfig, ...], EngineParts] = {}

    def _replayed(self, query_id: str) -> ReplayedQuery:
        if query_id not in self._queries:
            client = httpx.Client(transport=self.worker.store.transport(query_id))
            self._clients.append(client)
            self._queries[query_id] = replay_query(self.worker, query_id, client)
        return self._queries[query_id]

    def _engines(self, engines: tuple[EngineConfig, ...]) -> EngineParts:
        if engines not in self._parts:
            self._parts[engines] = engine_parts(
                replace(self.plan, engines=engines), pages=self.worker.pages
            )
        return self._parts[engines]

    def handle(self, request: _Request) -> tuple[Any, Counter[str]]:
        before = Counter(self.worker.store.counts)
        if request[0] == "gains":
            _kind, engine, objective, query_ids = request
            measures = tuple(m for m in self.plan.measures if str(m) == objective.measure)
            narrow = replace(self.plan, modes=(objective.mode,), measures=measures)
            parts = self._engines((engine,))
            gains: dict[str, float | None] = {}
            for query_id in query_ids:
                out = query_output(self.worker, self._replayed(query_id), parts, narrow)
                cell = objective.values(out.scores).get(engine.config_id, {})
                gains[query_id] = objective.gain(cell)
            result: Any = gains
        else:
            result = [
                query_output(self.worker, self._replayed(q), self._engines(e), self.plan)
                for q, e in request[1]
            ]
        return result, Counter(self.worker.store.counts) - before

    def close(self) -> None:
        for client in self._clients:
            client.close()


def _picklable(exc: BaseException) -> BaseException:
    """``exc`` if it survives the pipe, else one that says what it was."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return WorkerError(f"{type(exc).__name__}: {exc}")
    return exc


def _serve(conn: Connection, plan: RunPlan) -> None:
    """A shard process: answer requests until told to stop (None)."""
    replayer = _Replayer(plan)
    try:
        while (request := conn.recv()) is not None:
            try:
                conn.send(("ok", replayer.handle(request)))
            except Exception as exc:
                conn.send(("error", _picklable(exc)))
    finally:
        replayer.close()
        conn.close()


class _Process:
    def __init__(self, plan: RunPlan, index: int) -> None:
        context = multiprocessing.get_context("fork")
        self.index = index
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, plan), daemon=True)
        self.process.start()
        child.close()

    def send(self, request: _Request) -> None:
        self.conn.send(request)

    def receive(self) -> tuple[Any, Counter[str]]:
        try:
            status, payload = self.conn.recv()
        except EOFError:
            self.process.join(timeout=5)
            raise WorkerError(
                f"tuning worker {self.index} stopped unexpectedly (exit code "
                f"{self.process.exitcode}; killed, or out of memory?)"
            ) from None
        if status == "error":
            raise payload
        result, counts = payload
        return result, counts

    def close(self) -> None:
        with contextlib.suppress(OSError):  # already gone
            self.conn.send(None)
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join()
        self.conn.close()


class EpisodeScorer:
    """The objective per query of any engine config, by replay, cached; a context manager
    starting ``workers`` shard processes (1: none). ``query_ids`` fixes each query's shard."""

    def __init__(
        self, plan: RunPlan, objective: Objective, query_ids: Sequence[str], *, workers: int
    ) -> None:
        self.plan = plan
        self.objective = objective
        count = max(1, min(workers, len(query_ids)))
        self._shard = {q: i % count for i, q in enumerate(query_ids)}
        self._count = count
        self._shards: list[_Process] = []
        self._local: _Replayer | None = None  # the one shard, in this process
        self._cache: dict[tuple[EngineConfig, str], float | None] = {}
        #: requests the cassette store answered, by kind (replayed, simulated, skipped)
        self.requests: Counter[str] = Counter()
        #: episodes replayed (a cached value costs none)
        self.episodes = 0

    def __enter__(self) -> EpisodeScorer:
        if self._count == 1:
            self._local = _Replayer(self.plan)
        else:
            self._shards = [_Process(self.plan, i) for i in range(self._count)]
        return self

    def __exit__(self, *exc: object) -> None:
        for shard in self._shards:
            shard.close()
        if self._local is not None:
            self._local.close()
        self._shards, self._local = [], None

    def _ask(self, requests: Mapping[int, _Request]) -> dict[int, Any]:
        """Send every shard its request, then collect the answers (the shards work at once)."""
        local = self._local
        if local is None:
            for index, request in requests.items():
                self._shards[index].send(request)
        answers = {}
        for index, request in requests.items():
            answer = local.handle(request) if local else self._shards[index].receive()
            answers[index], counts = answer
            self.requests.update(counts)
        return answers

    def gains(self, engine: EngineConfig, query_ids: Sequence[str]) -> dict[str, float]:
        """stage − control per query for ``engine`` (its config_id is ignored); a query the
        objective cannot score is left out."""
        key = replace(engine, config_id="tuned")
        missing = [q for q in query_ids if (key, q) not in self._cache]
        by_shard: dict[int, list[str]] = {}
        for query_id in missing:
            by_shard.setdefault(self._shard[query_id], []).append(query_id)
        requests = {i: ("gains", key, self.objective, ids) for i, ids in by_shard.items()}
        for answer in self._ask(requests).values():
            for query_id, gain in answer.items():
                self._cache[(key, query_id)] = gain
        self.episodes += len(missing) * len(self.plan.users)
        found = {q: self._cache[(key, q)] for q in query_ids}
        return {q: gain for q, gain in found.items() if gain is not None}

    def outputs(self, engines: Mapping[str, tuple[EngineConfig, ...]]) -> list[QueryOutput]:
        """Full episodes of each query's engines (all modes and measures), in the order
        of ``engines``."""
        by_shard: dict[int, list[tuple[str, tuple[EngineConfig, ...]]]] = {}
        for query_id, mine in engines.items():
            by_shard.setdefault(self._shard[query_id], []).append((query_id, mine))
        answers = self._ask({i: ("outputs", pairs) for i, pairs in by_shard.items()})
        found = {out.query_id: out for answer in answers.values() for out in answer}
        self.episodes += sum(len(e) for e in engines.values()) * len(self.plan.users)
        return [found[q] for q in engines]
