"""What the episodes of one query share, computed once: memoized engine steps.

Within one query, every (engine config, user) episode starts from the same results, and
most of what an episode computes depends on far less than its config: the no-feedback
control, the user's marks on the provider's first page, round 1's refined query for every
config with the same refiner, each ranking's measures. :class:`QueryMemo` remembers each
step by what it depends on and no more, so the episodes of a query (the runner's task) share
every step whose inputs coincide:

- a ranking by (the ranker's settings, the candidates' content, the feedback): TF-IDF Rocchio
  rankers that share an analyzer are scored together, one row per (alpha, beta, gamma), by
  :func:`evidence_bench.engine.ranking.pool_orders_many` (exactly the order each ranker
  gives), every feedback on one candidate set in one matrix product;
- a refined query by (the refiner's effective params, the candidates, the feedback);
- a user's marks by (the user, the round, the keys displayed, the keys examined before);
- a residual's judgments by the keys examined, the shuffled control's labels by (user,
  round, marks, examined).

Each is a pure function of those inputs (these rankers, refiners and users are
deterministic, and every random draw is seeded by what it is about), so an episode run
with a memo gives exactly the rows it gives without one. Only the parts whose purity is
known are memoized (the TF-IDF and provider-order rankers, the lexical and term-Rocchio
refiners, the shipped user policies); any other ranker, refiner or user is called as it is
(:mod:`evidence_bench.experiment.episodes`).

A memo lives for one query: candidate lists are told apart by content (every field of each
result but its ``rank``), and the objects a memo has seen are kept alive with it so that
an ``id`` it remembers cannot be reused.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import Any, cast

from evidence_bench.engine.base import (
    POLARITY,
    Feedback,
    Label,
    Ranker,
    RefinedQuery,
    Refiner,
)
from evidence_bench.engine.params import part_key
from evidence_bench.engine.ranking import (
    PoolMatrix,
    ProviderOrderRanker,
    TfidfRocchioRanker,
    marked_positions,
    pool_matrix,
    pool_orders_many,
    query_weights,
    rocchio_weights,
)
from evidence_bench.engine.refiner import LexicalRefiner
from evidence_bench.engine.term_rocchio import TermRocchioRefiner
from evidence_bench.engine.text import Analyzer
from evidence_bench.evaluation.measures import (
    Measure,
    QueryJudgments,
    prepare,
)
from evidence_bench.evidence import Evidence
from evidence_bench.users.policies import POLICIES, Mark, UserPolicy

__all__ = ["QueryMemo"]


_FeedbackKey = frozenset[tuple[str, Label]]


@dataclass(slots=True)
class _Pool:
    """One content of a candidate list: its number, and the rankings built from it."""

    objects: tuple[Evidence, ...]  # the first objects seen with this content
    content: int
    ranked: dict[tuple[int, ...], list[Evidence]] = field(default_factory=dict)
    placed: dict[tuple[int, int], Evidence] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    #: each key's positions among the candidates (built when first needed)
    at: dict[str, list[int]] | None = None
    text: tuple[str, ...] | None = None
    plain: bool | None = None
    #: per analyzer: the tf-idf arrays and the query's vector
    spaces: dict[Analyzer, tuple[PoolMatrix, dict[str, float]]] = field(default_factory=dict)

    def space(self, analyzer: Analyzer, query: str) -> tuple[PoolMatrix, dict[str, float]]:
        """The candidates' tf-idf arrays under ``analyzer``, and ``query``'s vector there."""
        space = self.spaces.get(analyzer)
        if space is None:
            matrix = pool_matrix(analyzer, self.texts())
            space = self.spaces[analyzer] = (matrix, query_weights(analyzer, matrix, query))
        return space

    def texts(self) -> tuple[str, ...]:
        """Each candidate's :attr:`~evidence_bench.evidence.Evidence.text`."""
        if self.text is None:
            self.text = tuple(item.text for item in self.objects)
        return self.text

    def refiner_matrix(self, analyzer: Analyzer) -> PoolMatrix | None:
        """The :func:`pool_matrix` of the candidates' refiner texts
        (:func:`~evidence_bench.engine.refiner.document_text`) under ``analyzer``, where
        they are their :meth:`texts` (no extra snippets), else None."""
        if self.plain is None:
            self.plain = not any(item.extra_snippets for item in self.objects)
        if not self.plain:
            return None
        space = self.spaces.get(analyzer)
        return pool_matrix(analyzer, self.texts()) if space is None else space[0]

    def marked(self, feedback: Feedback) -> tuple[list[int], list[int]]:
        """:func:`~evidence_bench.engine.ranking.marked_positions` of the candidates' keys,
        found from the feedback's keys (a few) instead of every candidate's."""
        if not feedback or len(feedback) * 4 > len(self.keys):
            return marked_positions(self.keys, feedback)
        if self.at is None:
            at: dict[str, list[int]] = {}
            for position, key in enumerate(self.keys):
                at.setdefault(key, []).append(position)
            self.at = at
        pull: list[int] = []
        push: list[int] = []
        find = self.at.get
        for key, label in feedback.items():
            found = find(key)
            if found is not None:
                polarity = POLARITY[label]
                if polarity > 0:
                    pull += found
                elif polarity < 0:
                    push += found
        pull.sort()
        push.sort()
        return pull, push

    def ranking(self, order: Sequence[int]) -> list[Evidence]:
        """The candidates in ``order`` with rank renumbered, as
        :func:`~evidence_bench.evidence.renumber` gives them; built once per order, and each
        (candidate, rank) copy once."""
        return list(self.shared_ranking(order))

    def shared_ranking(self, order: Sequence[int]) -> list[Evidence]:
        """:meth:`ranking`, the list the pool keeps (not to be changed)."""
        key = tuple(order)
        ranked = self.ranked.get(key)
        if ranked is None:
            placed = self.placed
            ranked = []
            for position, index in enumerate(key, start=1):
                item = placed.get((index, position))
                if item is None:
                    item = self.objects[index]
                    if item.rank != position:
                        item = item.with_rank(position)
                    placed[(index, position)] = item
                ranked.append(item)
            self.ranked[key] = ranked
        return ranked


@dataclass(slots=True)
class _Orders:
    """One (candidates, feedback)'s order of the candidates under each row of a family (None:
    not scored yet), and the rankings built from them."""

    orders: list[list[int] | None]
    rankings: list[list[Evidence] | None]


@dataclass(slots=True)
class _Family:
    """The TF-IDF Rocchio rankers of one analyzer, a row each, scored together."""

    analyzer: Analyzer
    rows: dict[TfidfRocchioRanker, int] = field(default_factory=dict)
    weights: Any = None  # rocchio_weights of the rows, once they are all known
    #: (content id, feedback) -> each row's order, and each row's ranking once built
    orders: dict[tuple[int, _FeedbackKey], _Orders] = field(default_factory=dict)

    def row(self, ranker: TfidfRocchioRanker) -> int:
        if ranker not in self.rows:
            self.rows[ranker] = len(self.rows)
            self.weights = None
        return self.rows[ranker]


class QueryMemo:
    """The memoized steps of one query's episodes (see the module docstring)."""

    def __init__(self, query: str, measures: Sequence[Measure]) -> None:
        self.query = query
        self.measures = tuple(measures)
        self._by_ids: dict[tuple[int, ...], _Pool] = {}
        self._contents: dict[tuple[Hashable, ...], _Pool] = {}
        self._alive: list[tuple[Evidence, ...]] = []  # every list whose ids are keys
        self._families: dict[Analyzer, _Family] = {}
        self._refined: dict[tuple[Hashable, int, _FeedbackKey], RefinedQuery] = {}
        self._marks: dict[tuple[Hashable, ...], list[Mark]] = {}
        #: the measures' names, in order
        self.names = tuple(str(measure) for measure in self.measures)
        self._residual: dict[frozenset[str], QueryJudgments] = {}
        self._shuffled: dict[tuple[Hashable, ...], dict[str, Label]] = {}
        self._shown = _DisplayedKeys()

    # --- candidates -----------------------------------------------------------------------

    def pool(self, candidates: Sequence[Evidence]) -> _Pool:
        """The pool of these candidates: one per content (every field but ``rank``), so
        content-equal lists of other objects (each session renumbers its own) share their
        scores and rankings."""
        ids = tuple(map(id, candidates))
        pool = self._by_ids.get(ids)
        if pool is None:
            content = tuple(
                (
                    item.url,
                    item.title,
                    item.snippet,
                    item.source,
                    item.page_age,
                    item.age,
                    item.domain,
                    item.language,
                    item.extra_snippets,
                )
                for item in candidates
            )
            pool = self._contents.get(content)
            if pool is None:
                pool = _Pool(tuple(candidates), len(self._contents))
                pool.keys = [item.key for item in candidates]
                self._contents[content] = pool
            self._by_ids[ids] = pool
            self._alive.append(tuple(candidates))
        return pool

    # --- engine parts ---------------------------------------------------------------------

    def ranker(self, ranker: Ranker) -> Ranker:
        """``ranker`` answering from the memo where its output is known to be pure."""
        if type(ranker) is TfidfRocchioRanker:
            family = self._families.setdefault(ranker.analyzer, _Family(ranker.analyzer))
            return _MemoTfidf(self, family, ranker)
        if type(ranker) is ProviderOrderRanker:
            return _MemoProviderOrder(self, ranker)
        return ranker

    def refiner(self, refiner: Refiner) -> Refiner:
        """``refiner`` answering from the memo where its output is known to be pure."""
        if type(refiner) in (LexicalRefiner, TermRocchioRefiner):
            return _MemoRefiner(self, refiner)
        return refiner

    def user(self, name: str, user: UserPolicy) -> UserPolicy:
        """``user`` answering from the memo (the shipped policies are pure: every draw is
        seeded by (seed, query, round, document))."""
        if type(user) in POLICIES.values():
            return _MemoUser(self, name, user)
        return user

    def orders(
        self, family: _Family, candidates: Sequence[Evidence], feedback: Feedback
    ) -> tuple[_Pool, list[list[int]]]:
        """Each row's order of ``candidates`` under ``feedback``."""
        pool, orders = self._orders(family, candidates, feedback)
        return pool, [order for order in orders.orders if order is not None]

    def _orders(
        self, family: _Family, candidates: Sequence[Evidence], feedback: Feedback
    ) -> tuple[_Pool, _Orders]:
        pool = self.pool(candidates)
        return pool, self._pool_orders(family, pool, feedback, frozenset(feedback.items()))

    def _pool_orders(
        self,
        family: _Family,
        pool: _Pool,
        feedback: Feedback,
        marks: _FeedbackKey,
        rows: Sequence[int] | None = None,
    ) -> _Orders:
        """The rows' orders of ``pool`` under ``feedback`` (``marks``: its items): those of
        ``rows`` (None: every row of the family) not scored yet are scored together
        (:meth:`_score`)."""
        orders = self._entry(family, pool, marks)
        self._score(family, pool, [(feedback, orders, rows)])
        return orders

    def _entry(self, family: _Family, pool: _Pool, marks: _FeedbackKey) -> _Orders:
        """The orders known of ``pool`` under the feedback ``marks``, a slot per row."""
        key = (pool.content, marks)
        count = len(family.rows)
        orders = family.orders.get(key)
        if orders is None:
            orders = family.orders[key] = _Orders([None] * count, [None] * count)
        elif len(orders.orders) < count:  # rows added since
            grown = count - len(orders.orders)
            orders.orders += [None] * grown
            orders.rankings += [None] * grown
        return orders

    def _score(
        self,
        family: _Family,
        pool: _Pool,
        wanted: Sequence[tuple[Feedback, _Orders, Iterable[int] | None]],
    ) -> None:
        """Fill in the orders of ``pool`` that ``wanted`` asks for and that are not known: per
        (feedback, its orders, the rows wanted (None: all)), in one :func:`pool_orders_many`
        call. A row's order does not depend on the other rows scored with it (every
        operation is per row), so scoring only the rows an episode needs gives the same
        orders."""
        count = len(family.rows)
        groups = []
        for feedback, orders, rows in wanted:
            known = orders.orders
            missing = [r for r in (range(count) if rows is None else rows) if known[r] is None]
            if missing:
                groups.append((feedback, known, missing))
        if not groups:
            return
        if family.weights is None:
            family.weights = rocchio_weights(list(family.rows))
        every = family.weights
        matrix, query_vector = pool.space(family.analyzer, self.query)
        found = pool_orders_many(
            query_vector,
            matrix,
            [
                (
                    every if len(missing) == count else every[missing],
                    *pool.marked(feedback),
                )
                for feedback, _, missing in groups
            ],
        )
        for (_, known, missing), rows_found in zip(groups, found, strict=True):
            for row, order in zip(missing, rows_found, strict=True):
                known[row] = order

    # --- the round-by-round path (evidence_bench.experiment.episodes) ---------------------

    @staticmethod
    def plannable(ranker: object, control: object, refiner: object) -> bool:
        """Whether the parts (as :meth:`ranker` and :meth:`refiner` gave them) are all the
        memo's pure ones: rankers that answer :meth:`order`, a refiner that answers
        :meth:`refine_pool`."""
        rankers = (_MemoTfidf, _MemoProviderOrder)
        return (
            type(ranker) in rankers and type(control) in rankers and type(refiner) is _MemoRefiner
        )

    @staticmethod
    def plannable_user(user: object) -> bool:
        """Whether ``user`` (as :meth:`user` gave it) is one the memo knows to be pure."""
        return type(user) is _MemoUser

    @staticmethod
    def pure_refiner(refiner: object) -> bool:
        """Whether ``refiner`` (as :meth:`refiner` gave it) answers :meth:`refine_pool`."""
        return type(refiner) is _MemoRefiner

    @staticmethod
    def order_token(ranker: Ranker) -> Hashable | None:
        """One key per distinct ordering rule among the plannable rankers: rankers with one
        token order any pool alike under any feedback; None: a ranker not known to be pure."""
        if isinstance(ranker, _MemoTfidf):
            return (id(ranker.family), ranker.row)
        if isinstance(ranker, _MemoProviderOrder):
            return "provider_order"
        return None

    def order(
        self, ranker: Ranker, pool: _Pool, feedback: Feedback, marks: _FeedbackKey
    ) -> Sequence[int]:
        """The order of ``pool``'s candidates that a plannable ``ranker`` gives under
        ``feedback`` (``marks``: its items, as a frozenset): ``ranker.rank(query, pool's
        candidates, feedback)`` is ``pool.ranking(order)``."""
        if isinstance(ranker, _MemoTfidf):
            row = ranker.row
            known = ranker.family.orders.get((pool.content, marks))
            if known is not None and row < len(known.orders):
                found = known.orders[row]
                if found is not None:  # prefetched
                    return found
            order = self._pool_orders(ranker.family, pool, feedback, marks, (row,)).orders[row]
            assert order is not None
            return order
        if isinstance(ranker, _MemoProviderOrder):
            return range(len(pool.objects))
        raise TypeError(f"{type(ranker).__name__} is not plannable")

    def prefetch(self, wanted: Iterable[tuple[Ranker, _Pool, Feedback, _FeedbackKey]]) -> None:
        """Score, for :meth:`order`, every (plannable ranker, pool, feedback, its items) of
        ``wanted``: one :func:`pool_orders_many` call per (family, pool) for every feedback
        and the rows they need and no other (a round of many episodes needs a few rows of
        most)."""
        groups: dict[
            tuple[int, int], tuple[_Family, _Pool, dict[_FeedbackKey, tuple[Feedback, set[int]]]]
        ] = {}
        for ranker, pool, feedback, marks in wanted:
            if isinstance(ranker, _MemoTfidf):
                family = ranker.family
                group = groups.get((id(family), pool.content))
                if group is None:
                    group = groups[(id(family), pool.content)] = (family, pool, {})
                found = group[2].get(marks)
                if found is None:
                    found = group[2][marks] = (feedback, set())
                found[1].add(ranker.row)
        for family, pool, feedbacks in groups.values():
            self._score(
                family,
                pool,
                [
                    (feedback, self._entry(family, pool, marks), sorted(rows))
                    for marks, (feedback, rows) in feedbacks.items()
                ],
            )

    def refine_pool(
        self, refiner: Refiner, pool: _Pool, feedback: Feedback, marks: _FeedbackKey
    ) -> RefinedQuery:
        """``refiner.refine(query, pool's candidates, feedback)`` for a refiner
        :meth:`refiner` memoized (``marks``: the feedback's items, as a frozenset)."""
        assert isinstance(refiner, _MemoRefiner)
        key = (refiner.key, pool.content, marks)
        refined = self._refined.get(key)
        if refined is None:
            inner = refiner.inner
            found: RefinedQuery | None = None
            if type(inner) is LexicalRefiner:
                matrix = (
                    None if inner.background is not None else pool.refiner_matrix(inner.analyzer)
                )
                if matrix is not None:  # the arrays and the marks the pool has already
                    marked = pool.marked(feedback)
                    found = inner.refine_counted(self.query, pool.objects, feedback, matrix, marked)
            if found is None:
                found = inner.refine(self.query, pool.objects, feedback)
            refined = self._refined[key] = found
        return refined

    def ranked(
        self, family: _Family, row: int, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        """``candidates`` ranked by ``family``'s row ``row`` under ``feedback`` (a new list)."""
        pool, orders = self._orders(family, candidates, feedback)
        ranking = orders.rankings[row]
        if ranking is None:
            order = orders.orders[row]
            assert order is not None
            ranking = orders.rankings[row] = pool.shared_ranking(order)
        return ranking.copy()

    def refine(
        self, refiner: _MemoRefiner, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        pool = self.pool(candidates)
        key = (refiner.key, pool.content, frozenset(feedback.items()))
        refined = self._refined.get(key)
        if refined is None:
            refined = self._refined[key] = refiner.inner.refine(self.query, pool.objects, feedback)
        return refined

    def judge(
        self,
        user: _MemoUser,
        query_id: str,
        round_: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        key = (
            user.key,
            query_id,
            round_,
            tuple(item.key for item in displayed),
            frozenset(examined),
        )
        marks = self._marks.get(key)
        if marks is None:
            marks = self._marks[key] = user.inner.judge(
                query_id=query_id,
                round=round_,
                displayed=displayed,
                judgments=judgments,
                examined=examined,
            )
        return list(marks)

    def judge_keys(
        self,
        user: UserPolicy,
        query_id: str,
        round_: int,
        displayed: Sequence[str],
        judgments: Mapping[str, int],
        examined: frozenset[str],
    ) -> list[Mark]:
        """:meth:`judge` of a list given by its keys, for a user :meth:`plannable_user` (the
        shipped policies read nothing of a displayed result but its key: ``_scan``); the
        marks are the memo's list, not to be changed."""
        assert isinstance(user, _MemoUser)
        key = (user.key, query_id, round_, tuple(displayed), examined)
        marks = self._marks.get(key)
        if marks is None:
            shown = cast(list[Evidence], list(map(self._shown.__getitem__, displayed)))
            marks = self._marks[key] = user.inner.judge(
                query_id=query_id,
                round=round_,
                displayed=shown,
                judgments=judgments,
                examined=examined,
            )
        return marks

    # --- judgments ------------------------------------------------------------------------

    def residual(self, grades: Mapping[str, int], examined: Set[str]) -> QueryJudgments:
        """The judgments of the documents not examined (the residual mode's qrels)."""
        key = frozenset(examined)
        prepared = self._residual.get(key)
        if prepared is None:
            prepared = prepare({k: g for k, g in grades.items() if k not in examined})
            self._residual[key] = prepared
        return prepared

    def shuffled(self, key: tuple[Hashable, ...], make: Any) -> dict[str, Label]:
        """The shuffled control's labels for ``key``, made by ``make()`` once."""
        dealt = self._shuffled.get(key)
        if dealt is None:
            dealt = self._shuffled[key] = make()
        return dict(dealt)


class _MemoTfidf:
    """A TF-IDF Rocchio ranker answering from its family's shared orders."""

    def __init__(self, memo: QueryMemo, family: _Family, inner: TfidfRocchioRanker) -> None:
        self.memo, self.family, self.inner = memo, family, inner
        self.name = inner.name
        self.row = family.row(inner)

    def effective_params(self) -> dict[str, Any]:
        return self.inner.effective_params()

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        if query != self.memo.query:
            return self.inner.rank(query, candidates, feedback)
        return self.memo.ranked(self.family, self.row, candidates, feedback)


class _MemoProviderOrder:
    def __init__(self, memo: QueryMemo, inner: ProviderOrderRanker) -> None:
        self.memo, self.inner = memo, inner
        self.name = inner.name

    def effective_params(self) -> dict[str, Any]:
        return self.inner.effective_params()

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        pool = self.memo.pool(candidates)
        return pool.ranking(range(len(candidates)))


class _MemoRefiner:
    def __init__(self, memo: QueryMemo, inner: Refiner) -> None:
        self.memo, self.inner = memo, inner
        self.key = part_key(inner)

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        if query != self.memo.query:
            return self.inner.refine(query, candidates, feedback)
        return self.memo.refine(self, candidates, feedback)


class _DisplayedKey:
    """A displayed result's key, all of a result the shipped users read
    (:meth:`QueryMemo.judge_keys`)."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key


class _DisplayedKeys(dict[str, _DisplayedKey]):
    """One :class:`_DisplayedKey` per key, made when first asked for."""

    def __missing__(self, key: str) -> _DisplayedKey:
        shown = self[key] = _DisplayedKey(key)
        return shown


class _MemoUser:
    def __init__(self, memo: QueryMemo, name: str, inner: UserPolicy) -> None:
        self.memo, self.inner = memo, inner
        self.key = (name, id(inner))
        self._name = name

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def expects(self) -> Any:
        return self.inner.expects

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        return self.memo.judge(self, query_id, round, displayed, judgments, examined)
