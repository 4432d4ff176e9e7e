"""The episode protocol: a query's episodes, round by round, over every (engine, user).

:mod:`evidence_bench.protocol.episode`'s docstring says what an episode is: the user's
rounds, the stages and controls, the evaluation modes. :func:`plan_episodes` runs them for
all of a query's (engine config, user) pairs at once; one episode is a batch of one
(:func:`run_episode`). Each step is computed once for what it depends on, where its
components are known to be pure (:meth:`QueryMemo.plannable`: TF-IDF Rocchio and
provider-order rankers, the lexical and term-Rocchio refiners, the shipped users):

- a user's view of a list and its marks, by (the user's state: examined, pinned, labels;
  the list displayed): in round 1 one per user for every config;
- a ranking by (ordering rule, candidates, feedback); a round asks for all of its episodes'
  rankings before any is read, so the memo scores each (candidates, feedback) in one call
  for the rows that round needs (:meth:`QueryMemo.prefetch`);
- a refined query and what its search added by (refiner, candidates, feedback), the
  equal-depth lists by their length; each search is asked once where the provider answers a
  repeated search alike (``repeats``), and :attr:`Planned.searches` lists them in the order
  episodes one after another ask them (the order ``documents.jsonl`` lists documents in);
- a stage's lists by (ranking, partner, the user's state), shaped for every mode at the
  end at once: the rankings as codes of the query's keys, what each state examined as a
  mask, each mode's list a few array operations on them (:meth:`_Planner._evaluate`);
- the measures of every distinct (grades, judgments) row of those lists in one
  :func:`~evidence_bench.evaluation.measures.evaluate_grades` batch.

Any other ranker, refiner or user (a user's own, through Hydra's ``_target_``) is not known
to be pure: its episodes run one at a time, each a batch of one, and it is called for every
step of its episode, in the order a session calls it (:class:`~evidence_bench.engine.
session.SearchSession`: the user's marks; rerank, control, shuffled; the expansion's
refined query, search and ranking; the equal-depth control), its results never shared.
Errors are the ones the first episode to meet one raises: where a batch of many fails, its
episodes run again one at a time, in plan order.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from evidence_bench.engine.base import Label, Ranker, RefinedQuery, Refiner, SearchProvider
from evidence_bench.errors import ConfigurationError, FeedbackError
from evidence_bench.evaluation.measures import (
    Measure,
    QueryJudgments,
    evaluate_grades,
    evaluate_many,
)
from evidence_bench.evidence import Evidence, canonical_url, dedupe, validate_query
from evidence_bench.experiment.memo import QueryMemo, _Pool
from evidence_bench.protocol.episode import (
    LABEL_TEXT,
    EpisodeResult,
    Judgments,
    _shuffled,
    frozen_order,
)
from evidence_bench.protocol.stages import PARTNERS, STAGES
from evidence_bench.users.policies import UserPolicy
from evidence_bench.web.cassettes import SkippedRequest

__all__ = ["Planned", "PlannedEpisode", "plan_episodes", "run_episode"]

#: One examined document of a round: (round, key, label, rank), as EpisodeResult.feedback.
_Row = tuple[int, str, str, int]
#: How a mode shapes a stage's list: as it is (full judgments), residual, frozen.
_AS_IS, _RESIDUAL, _FROZEN = 0, 1, 2
_SHAPES = 3


@dataclass(slots=True, eq=False)
class PlannedEpisode(EpisodeResult):
    """An :class:`~evidence_bench.protocol.episode.EpisodeResult` of :func:`plan_episodes`.
    Its round records and ranking lists are shared with the query's other episodes where
    they coincide: read them, do not change them."""

    #: per round, its rows of ``feedback`` (a list shared by every episode with that round)
    round_marks: list[list[_Row]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Planned:
    """A query's planned episodes in plan order (config by config, user by user), and the
    searches their sessions would have asked one episode after another, in that order."""

    episodes: list[PlannedEpisode]
    searches: list[tuple[str, int]]


#: The stage each of STAGES is cut to the length of (PARTNERS), None: none.
_PARTNER_OF = tuple(PARTNERS.get(stage) for stage in STAGES)


class _StageKeys(dict[int, dict[int, list[tuple[int, str]]]]):
    """round -> number of stages -> the stages' (round, stage) keys (one tuple each)."""

    def __missing__(self, round_: int) -> dict[int, list[tuple[int, str]]]:
        found = self[round_] = {
            count: [(round_, stage) for stage in STAGES[:count]] for count in (4, 5, 7)
        }
        return found


@dataclass(slots=True, eq=False)
class _Ranked:
    """One distinct ranking of the query: its keys (what every later step reads of it), and
    its results where a user or a ranker not known to be pure reads them: ``items``, or
    ``source``'s (a pool and an order of it) when first asked for."""

    index: int
    keys: list[str]
    top: list[str] | None = None
    items: list[Evidence] | None = None
    source: tuple[_Pool, Sequence[int]] | None = None

    def evidence(self) -> list[Evidence]:
        """The ranking's results, rank renumbered as the ranker gave them."""
        if self.items is None:
            assert self.source is not None
            pool, order = self.source
            self.items = pool.shared_ranking(order)
        return self.items

    def head(self) -> list[str]:
        """The first 10 keys (a round record's lists), one list per ranking."""
        if self.top is None:
            self.top = self.keys[:10]
        return self.top


@dataclass(slots=True, eq=False)
class _Labels:
    """One feedback dict (a session's, or the shuffled control's), numbered."""

    index: int
    labels: dict[str, Label]
    items: frozenset[tuple[str, Label]]


@dataclass(slots=True, eq=False)
class _State:
    """What a user has done before a round: examined, pinned, labelled."""

    index: int
    examined: frozenset[str]
    pinned: dict[str, int]
    feedback: _Labels
    residual: QueryJudgments | None = None
    #: the pinned keys in position order where they hold positions 1..p (an episode's
    #: pins, unless a click user skipped a rank), else None
    prefix: list[str] | None = None
    #: the ranking displayed (its index) -> the round the user has on it
    steps: dict[int, _Step] = field(default_factory=dict)
    dealt: _Labels | None = None
    #: each examined document as it was first shown (a user not known to be pure reads it)
    shown: dict[str, Evidence] = field(default_factory=dict)


@dataclass(slots=True, eq=False)
class _Step:
    """One round of a user on one displayed list: the marks and the state after them."""

    index: int
    after: _State
    rows: list[_Row]
    marks: list[tuple[str, str]]


@dataclass(slots=True, eq=False)
class _Expansion:
    """One refined query (None: refining was skipped), and the candidates after its search
    (None: skipped)."""

    refined: RefinedQuery | None
    limit: int
    pool: _Pool | None
    added: int


@dataclass(slots=True, eq=False)
class _User:
    user: UserPolicy
    seed: int
    policy: str
    start: _State
    #: the memo knows it to be pure: its marks are shared by every state and list alike
    pure: bool = True


@dataclass(slots=True, eq=False)
class _Episode:
    ranker: Ranker
    control: Ranker
    refiner: Refiner
    #: each part's key among the memo's pure ones; None: not known to be pure (called
    #: for every step, never shared)
    rule: Hashable | None
    control_rule: Hashable | None
    refiner_key: Hashable | None
    user: _User
    state: _State = field(init=False)
    displayed: _Ranked = field(init=False)
    pool: _Pool = field(init=False)
    result: PlannedEpisode = field(init=False)
    shapes: list[int] = field(default_factory=list)
    searches: list[tuple[str, int]] = field(default_factory=list)
    #: this round's stages so far, and its rerank (_first_stages, _last_stages)
    stages: list[_Ranked] = field(default_factory=list)
    breakdown: list[dict[str, Any]] | None = None
    #: the expansion's ranking where it was ranked in _expand (parts not known to be pure)
    expanded: _Ranked | None = None

    @property
    def pure(self) -> bool:
        """Every part is one the memo knows to be pure."""
        known = (self.rule, self.control_rule, self.refiner_key)
        return self.user.pure and all(key is not None for key in known)


def plan_episodes(
    *,
    memo: QueryMemo,
    query_id: str,
    query: str,
    initial: Sequence[Evidence],
    deep: Sequence[Evidence] | None,
    provider: SearchProvider,
    engines: Sequence[tuple[Ranker, Ranker, Refiner]],
    users: Sequence[tuple[UserPolicy, int, str]],
    judgments: Judgments,
    modes: Sequence[str],
    rounds: int,
    depth: int,
    repeats: bool = True,
) -> Planned:
    """Every (engine, user) episode of one query from the provider's ``initial`` results,
    engine by engine and user by user (see the module docstring).

    ``engines``: each config's (ranker, control, refiner) as ``memo`` gave them
    (:meth:`QueryMemo.ranker`, :meth:`QueryMemo.refiner`); ``users``: each user as the memo
    gave it (:meth:`QueryMemo.user`) with its ``seed`` (the run's) and ``policy`` (its name
    in the run), which seed the shuffled control. ``deep`` is the provider's list for the
    original query fetched deeper than ``initial`` (at least as long as any expanded list
    can grow), for the equal-depth controls; None leaves them out. ``repeats``: the provider
    answers a repeated search alike, so each distinct search is asked once.
    """
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise ConfigurationError(f"limit must be an integer >= 1, got {depth!r}")
    jobs = [(engine, user) for engine in engines for user in users]
    parts = (memo, query_id, query, initial, deep, provider, judgments, depth, repeats)
    try:
        return _Planner(*parts).run(jobs, modes, rounds)
    except Exception:
        if len(jobs) < 2:
            raise
    # The batch failed: the first episode to fail, one at a time in plan order, says why.
    for job in jobs:
        _Planner(*parts).run([job], modes, rounds)
    raise AssertionError("plan_episodes: a batch failed where its episodes one by one did not")


def run_episode(
    *,
    query_id: str,
    query: str,
    initial: Sequence[Evidence],
    deep: Sequence[Evidence] | None,
    provider: SearchProvider,
    ranker: Ranker,
    control: Ranker,
    refiner: Refiner,
    user: UserPolicy,
    judgments: Judgments,
    measures: Sequence[Measure],
    modes: Sequence[str],
    rounds: int,
    depth: int,
    seed: int,
    policy: str,
) -> EpisodeResult:
    """One episode: :func:`plan_episodes` of one engine and one user (a batch of one), with
    a memo of its own."""
    memo = QueryMemo(query, measures)
    planned = plan_episodes(
        memo=memo,
        query_id=query_id,
        query=query,
        initial=initial,
        deep=deep,
        provider=provider,
        engines=[(memo.ranker(ranker), memo.ranker(control), memo.refiner(refiner))],
        users=[(memo.user(policy, user), seed, policy)],
        judgments=judgments,
        modes=modes,
        rounds=rounds,
        depth=depth,
        repeats=False,
    )
    return planned.episodes[0]


#: One episode to plan: its engine's (ranker, control, refiner) and its user's (user, seed,
#: policy).
_Job = tuple[tuple[Ranker, Ranker, Refiner], tuple[UserPolicy, int, str]]


class _Planner:
    """The caches of one query's plan (see the module docstring)."""

    def __init__(
        self,
        memo: QueryMemo,
        query_id: str,
        query: str,
        initial: Sequence[Evidence],
        deep: Sequence[Evidence] | None,
        provider: SearchProvider,
        judgments: Judgments,
        depth: int,
        repeats: bool,
    ) -> None:
        self.memo, self.query_id, self.query = memo, query_id, query
        #: the query as the session holds it (validated), which its ranker and refiner read
        self.session_query = validate_query(query)
        self.repeats = repeats
        self.initial, self.deep, self.provider = initial, deep, provider
        self.judgments, self.depth = judgments, depth
        self.rankings: list[_Ranked] = []
        self._interned: dict[tuple[int, tuple[int, ...]], _Ranked] = {}
        self._by_rule: dict[tuple[Hashable, int, int], _Ranked] = {}
        self._labels: list[_Labels] = []
        self.empty = self._new_labels({})
        self.states: list[_State] = []
        self._steps = 0
        self._canonical: dict[str, str] = {}  # each marked key's canonical URL
        self._held: dict[int, frozenset[str]] = {}  # each pool's keys, by content
        self._prefixes: dict[int, _Ranked] = {}
        self._deep: dict[tuple[Hashable, int], tuple[_Ranked, _Ranked]] = {}
        self._deep_pools: dict[int, _Pool] = {}
        self._expansions: dict[tuple[Hashable, int, int], _Expansion] = {}
        self._grown: dict[tuple[int, int], tuple[_Pool, int, Sequence[Evidence]]] = {}
        self._records: dict[tuple[int, ...], dict[str, Any]] = {}
        self._patterns: dict[tuple[int, int, bool], tuple[list[tuple[int, str, str]], list[int]]]
        self._patterns = {}
        #: per round, per number of stages: each stage's (round, stage) key, in order
        self._stage_keys = _StageKeys()
        #: each distinct (ranking, partner, state) a stage scores, numbered (see _evaluate)
        self._items: dict[tuple[int, int, int], int] = {}
        #: each item's (ranking, partner, state, the partner's item), flat
        self._item_parts: list[int] = []

    # --- the plan -------------------------------------------------------------------------

    def run(self, jobs: Sequence[_Job], modes: Sequence[str], rounds: int) -> Planned:
        """Every episode of ``jobs``: those whose parts are all pure in one batch, then each
        other one alone; their results in the order of ``jobs``."""
        memo = self.memo
        codes = [
            _RESIDUAL if mode == "residual" else _FROZEN if mode == "frozen" else _AS_IS
            for mode in modes
        ]
        plain = self.session_query == self.query  # the memo's parts answer its query only
        users: dict[int, _User] = {}  # the pure users, one each, every config sharing it
        episodes: list[_Episode] = []
        for (ranker, control, refiner), (user, seed, policy) in jobs:
            pure = plain and QueryMemo.plannable_user(user)
            if not pure or id(user) not in users:
                found = _User(user, seed, policy, self._start(), pure=pure)
                if pure:
                    users[id(user)] = found
            else:
                found = users[id(user)]
            episodes.append(
                _Episode(
                    ranker,
                    control,
                    refiner,
                    memo.order_token(ranker) if plain else None,
                    memo.order_token(control) if plain else None,
                    getattr(refiner, "key", None) if plain and memo.pure_refiner(refiner) else None,
                    found,
                )
            )
        self._episodes([e for e in episodes if e.pure], modes, codes, rounds)
        for episode in episodes:
            if not episode.pure:
                self._episodes([episode], modes, codes, rounds)
        # Every list of every stage in every mode, scored in one batch: an episode's
        # evaluation ids are rows of that matrix.
        values, rows = self._evaluate(_RESIDUAL in codes, _FROZEN in codes)
        for episode in episodes:
            episode.result.evaluations = rows[episode.shapes].tolist()
            episode.result.values = values
        return Planned(
            [episode.result for episode in episodes],
            [search for episode in episodes for search in episode.searches],
        )

    def _episodes(
        self, episodes: Sequence[_Episode], modes: Sequence[str], codes: Sequence[int], rounds: int
    ) -> None:
        """Run ``episodes`` together, round by round: each phase asks for the rankings the
        next reads, scored together; for an episode alone, its parts are called in the
        order a session calls them."""
        if not episodes:
            return
        names = tuple(str(measure) for measure in self.memo.measures)
        shown = self._ranked_list([item.key for item in self.initial], list(self.initial))
        candidates = self.memo.pool(dedupe(self.initial))
        initial_pool = self.memo.pool(self.initial)
        for episode in episodes:
            result = episode.result = PlannedEpisode(measures=names)
            episode.state, episode.displayed, episode.pool = episode.user.start, shown, candidates
            if episode.rule is None:  # the session's first ranking, as a session starts
                self._rank(episode.ranker, None, candidates, self.empty, self.session_query)
            control = episode.control
            first_control = self._rank(control, episode.control_rule, initial_pool, self.empty)
            as_is = [  # before any feedback every mode scores the lists as they are
                self._item(shown, None, episode.state) * _SHAPES + _AS_IS,
                self._item(first_control, None, episode.state) * _SHAPES + _AS_IS,
            ]
            for mode in modes:
                result.scored += [(0, "initial", mode), (0, "control", mode)]
                episode.shapes += as_is
            result.rankings[(0, "initial")] = shown.keys
            result.rankings[(0, "control")] = first_control.keys
        for round_ in range(1, rounds + 1):
            before = [episode.displayed for episode in episodes]
            steps = [self._display(e, round_) for e in episodes]
            for episode, step in zip(episodes, steps, strict=True):
                episode.state = step.after
            self._prefetch(
                wanted
                for e in episodes
                for wanted in (
                    (e.ranker, e.rule, e.pool, e.state.feedback),
                    (e.control, e.control_rule, e.pool, self.empty),
                    (e.ranker, e.rule, e.pool, self._dealt(e.state, e.user, round_)),
                )
            )
            for episode in episodes:
                self._first_stages(episode, round_)
            expansions = [self._expand(e, e.pool, e.state) for e in episodes]
            self._prefetch(
                wanted
                for e, expansion in zip(episodes, expansions, strict=True)
                if expansion.pool is not None
                for wanted in (
                    (e.ranker, e.rule, expansion.pool, e.state.feedback),
                    *(
                        [(e.control, e.control_rule, self._deep_pool(len(expansion.pool.keys)),
                          self.empty)]
                        if self.deep is not None
                        else []
                    ),
                )
            )  # fmt: skip
            for episode, shown_before, step, expansion in zip(
                episodes, before, steps, expansions, strict=True
            ):
                self._round(episode, round_, shown_before, step, expansion, modes, codes)

    def _first_stages(self, episode: _Episode, round_: int) -> None:
        """A round's stages before its expansion, in the order a session's episode asks for
        them: rerank (counted where its feedback was not usable), control, shuffled, and
        the ranker's breakdown of its scores where it gives one."""
        result, state, pool = episode.result, episode.state, episode.pool
        rerank = self._rank(
            episode.ranker, episode.rule, pool, state.feedback, self.session_query, result
        )
        episode.expanded = None
        dealt = self._dealt(state, episode.user, round_)
        episode.stages = [
            self._prefix(len(pool.keys)),
            self._rank(episode.control, episode.control_rule, pool, self.empty),
            self._rank(episode.ranker, episode.rule, pool, dealt),
            rerank,
        ]
        episode.breakdown = None
        breakdown = getattr(episode.ranker, "score_breakdown", None)
        if breakdown is not None:  # rankers that can explain their scores (LiveFetch)
            candidates = list(pool.objects)
            try:
                rows = breakdown(self.query, candidates, state.feedback.labels)[:10]
            except FeedbackError:
                rows = breakdown(self.query, candidates, {})[:10]
            episode.breakdown = [row.record() for row in rows]

    def _round(
        self,
        episode: _Episode,
        round_: int,
        before: _Ranked,
        step: _Step,
        expansion: _Expansion,
        modes: Sequence[str],
        codes: Sequence[int],
    ) -> None:
        """The rest of one round of one episode: the user's ``step`` on ``before``, its first
        stages and the ``expansion`` are done; the expanded list and the equal-depth control
        are ranked, and every stage's lists queued for scoring."""
        result = episode.result
        state = step.after
        result.feedback += step.rows
        result.round_marks.append(step.rows)
        stages = episode.stages
        rerank = stages[3]
        if expansion.refined is not None:
            episode.searches.append((expansion.refined.query, expansion.limit))
        expanded = episode.expanded
        if expansion.pool is not None and expanded is None and episode.rule is not None:
            expanded = self._rank(episode.ranker, episode.rule, expansion.pool, state.feedback)
        if expansion.pool is not None:
            episode.pool = expansion.pool
        if expanded is None:
            result.skipped_expand += 1
            episode.displayed = rerank
        else:
            stages.append(expanded)
            if self.deep is not None:
                stages += self._equal_depth(
                    episode.control, episode.control_rule, len(expanded.keys)
                )
            episode.displayed = expanded
        record = self._record(round_, step, before, rerank, expansion, expanded, episode.breakdown)
        result.rounds.append(record)
        named = self._stage_keys[round_][len(stages)]
        rankings = result.rankings
        for key, ranked in zip(named, stages, strict=True):
            rankings[key] = ranked.keys

        # Every stage in every mode (the modes, then the stages), as the numbers of the
        # lists to score: one lookup per stage for all modes at once.
        skip = _RESIDUAL in codes and self._residual(state).num_relevant == 0
        pattern = self._pattern(round_, [stage for _, stage in named], modes, codes, skip)
        result.scored += pattern[0]
        item, beside = self._item, {"rerank": rerank, "expand": expanded, None: None}
        items = [
            item(ranked, beside[partner], state) * _SHAPES
            for ranked, partner in zip(stages, _PARTNER_OF, strict=False)
        ]
        episode.shapes += [at + codes[m] for m in pattern[1] for at in items]

    def _pattern(
        self,
        round_: int,
        stages: Sequence[str],
        modes: Sequence[str],
        codes: Sequence[int],
        skip: bool,
    ) -> tuple[list[tuple[int, str, str]], list[int]]:
        """A round's scored (round, stage, eval_mode)s, in order, and the modes' positions
        they take; ``skip``: the residual mode is left out (nothing relevant left to find:
        excluded, and counted)."""
        key = (round_, len(stages), skip)
        found = self._patterns.get(key)
        if found is None:
            used = [m for m, code in enumerate(codes) if not (skip and code == _RESIDUAL)]
            scored = [(round_, stage, modes[m]) for m in used for stage in stages]
            found = self._patterns[key] = (scored, used)
        return found

    # --- the user's side ------------------------------------------------------------------

    def _start(self) -> _State:
        state = _State(len(self.states), frozenset(), {}, self.empty, prefix=[])
        self.states.append(state)
        return state

    def _new_labels(self, labels: dict[str, Label]) -> _Labels:
        made = _Labels(len(self._labels), labels, frozenset(labels.items()))
        self._labels.append(made)
        return made

    def _display(self, episode: _Episode, round_: int) -> _Step:
        """The user's round on the displayed list held in the frozen frame, and the state
        after. A pure user reads only the displayed results' keys
        (:meth:`QueryMemo.judge_keys`), so its frame is a list of keys and its step is
        shared by every episode with that state and list; any other user is shown the
        results, each examined one as it was first shown."""
        state, displayed, user = episode.state, episode.displayed, episode.user
        step = state.steps.get(displayed.index) if user.pure else None
        if step is not None:
            return step
        frozen = frozen_order(displayed.keys, state.pinned) if state.pinned else displayed.keys
        position = {key: index for index, key in enumerate(frozen, start=1)}
        grades = self.judgments.grades
        shown: list[Evidence] = []
        if user.pure:
            marks = self.memo.judge_keys(
                user.user, self.query_id, round_, frozen, grades, state.examined
            )
        else:
            by_key = {item.key: item for item in displayed.evidence()}
            by_key.update(state.shown)
            shown = [by_key[key] for key in frozen]
            marks = user.user.judge(
                query_id=self.query_id,
                round=round_,
                displayed=shown,
                judgments=grades,
                examined=set(state.examined),
            )
        pinned = dict(state.pinned)
        labels = dict(state.feedback.labels)
        examined_as = dict(state.shown)
        rows: list[_Row] = []
        record: list[tuple[str, str]] = []
        for mark in marks:
            key, label = mark.key, mark.label
            at = position[key]
            pinned[key] = at
            if shown:
                examined_as[key] = shown[at - 1]
            text = LABEL_TEXT[label]
            rows.append((round_, key, text, at))
            record.append((key, text))
            if label is not None:  # filed as the session files it: by canonical URL
                labels[self._candidate(episode.pool, key)] = label
        examined = state.examined.union([mark.key for mark in marks])
        after = _State(len(self.states), examined, pinned, self._new_labels(labels))
        after.shown = examined_as
        self.states.append(after)
        positions = pinned.values()
        if not pinned:
            after.prefix = []
        elif (
            max(positions) == len(pinned)
            and min(positions) >= 1
            and len(set(positions)) == len(pinned)
        ):
            after.prefix = sorted(pinned, key=pinned.__getitem__)
        self._steps += 1
        step = _Step(self._steps - 1, after, rows, record)
        if user.pure:
            state.steps[displayed.index] = step
        return step

    def _candidate(self, pool: _Pool, key: str) -> str:
        """The canonical URL a mark on ``key`` is filed under, which must be a candidate's
        (:meth:`~evidence_bench.engine.session.SearchSession.mark`)."""
        canonical = self._canonical.get(key)
        if canonical is None:
            canonical = self._canonical[key] = canonical_url(key)
        held = self._held.get(pool.content)
        if held is None:
            held = self._held[pool.content] = frozenset(pool.keys)
        if canonical not in held:
            raise FeedbackError(f"no result with URL {key!r} among the {len(pool.keys)} candidates")
        return canonical

    def _dealt(self, state: _State, user: _User, round_: int) -> _Labels:
        """The shuffled control's labels for ``state`` (a state belongs to one user)."""
        if state.dealt is None:
            feedback = state.feedback
            deal = partial(
                _shuffled,
                feedback.labels,
                state.examined,
                seed=user.seed,
                policy=user.policy,
                query_id=self.query_id,
                round_=round_,
            )
            key = (user.seed, user.policy, round_, feedback.items, frozenset(state.examined))
            state.dealt = self._new_labels(self.memo.shuffled(key, deal))
        return state.dealt

    def _residual(self, state: _State) -> QueryJudgments:
        if state.residual is None:
            state.residual = self.memo.residual(self.judgments.grades, state.examined)
        return state.residual

    # --- the engine's side ----------------------------------------------------------------

    def _ranked_list(self, keys: list[str], items: list[Evidence] | None = None) -> _Ranked:
        ranked = _Ranked(len(self.rankings), keys, items=items)
        self.rankings.append(ranked)
        return ranked

    def _intern(self, pool: _Pool, order: Sequence[int]) -> _Ranked:
        key = (pool.content, tuple(order))
        ranked = self._interned.get(key)
        if ranked is None:
            keys = pool.keys
            ranked = _Ranked(len(self.rankings), [keys[i] for i in order], source=(pool, order))
            self.rankings.append(ranked)
            self._interned[key] = ranked
        return ranked

    def _rank(
        self,
        ranker: Ranker,
        rule: Hashable | None,
        pool: _Pool,
        feedback: _Labels,
        query: str | None = None,
        counted: PlannedEpisode | None = None,
    ) -> _Ranked:
        """``ranker.rank(query, pool, feedback)``, one lookup per (rule, pool, feedback); a
        ranker not known to be pure (``rule`` None) is called. ``query``: the session's
        (the ranker's own rankings), else the query as given (the controls'). With
        ``counted``, where the ranker says the feedback is not usable (a FeedbackError) it
        ranks without it and the episode counts the round (the session's ranker; its
        controls are called as they are)."""
        if rule is None:
            candidates = list(pool.objects)
            asked = self.query if query is None else query
            if not feedback.labels and counted is None:
                results = ranker.rank(asked, candidates, {})
            else:
                try:
                    results = ranker.rank(asked, candidates, feedback.labels)
                except FeedbackError:
                    if counted is not None:
                        counted.no_usable_feedback += 1
                    results = ranker.rank(asked, candidates, {})
            return self._ranked_list([item.key for item in results], list(results))
        key = (rule, pool.content, feedback.index)
        ranked = self._by_rule.get(key)
        if ranked is None:
            order = self.memo.order(ranker, pool, feedback.labels, feedback.items)
            ranked = self._by_rule[key] = self._intern(pool, order)
        return ranked

    def _prefix(self, length: int) -> _Ranked:
        """The provider's own order of its first ``length`` results (the list before feedback
        at the depth the candidates have reached), or of the initial ones where no deeper
        list was fetched."""
        ranked = self._prefixes.get(length)
        if ranked is None:
            deep, initial = self.deep, self.initial
            source = deep if deep is not None and len(deep) >= len(initial) else initial
            ranked = self._prefixes[length] = self._ranked_list(
                [item.key for item in source[:length]]
            )
        return ranked

    def _equal_depth(
        self, control: Ranker, rule: Hashable | None, length: int
    ) -> tuple[_Ranked, _Ranked]:
        """``deep_initial`` and ``deep_control`` at ``length``."""
        found = self._deep.get((rule, length)) if rule is not None else None
        if found is None:
            assert self.deep is not None
            found = (
                self._ranked_list([item.key for item in self.deep[:length]]),
                self._rank(control, rule, self._deep_pool(length), self.empty),
            )
            if rule is not None:
                self._deep[(rule, length)] = found
        return found

    def _deep_pool(self, length: int) -> _Pool:
        """The provider's deep list cut to ``length``, as candidates."""
        pool = self._deep_pools.get(length)
        if pool is None:
            assert self.deep is not None
            pool = self._deep_pools[length] = self.memo.pool(self.deep[:length])
        return pool

    def _prefetch(self, wanted: Iterable[tuple[Ranker, Hashable | None, _Pool, _Labels]]) -> None:
        """Have the memo score every (ranker, rule, pool, feedback) not ranked yet together
        (:meth:`QueryMemo.prefetch`), each once (a round's episodes ask many alike)."""
        known = self._by_rule
        asked: set[tuple[Hashable, int, int]] = set()
        distinct = []
        for ranker, rule, pool, feedback in wanted:
            key = (rule, pool.content, feedback.index)
            if rule is not None and key not in known and key not in asked:
                asked.add(key)
                distinct.append((ranker, pool, feedback.labels, feedback.items))
        self.memo.prefetch(distinct)

    def _expand(self, episode: _Episode, pool: _Pool, state: _State) -> _Expansion:
        """The session's expand: the refined query, its search, the candidates after it
        (and, for a ranker not known to be pure, their ranking, as the session asks for it
        next); a skipped request (refining, searching or that ranking) skips the expansion.
        Shared by (refiner, candidates, feedback) where the refiner is pure and the
        provider answers a repeated search alike."""
        shared = episode.refiner_key is not None and self.repeats
        key = (episode.refiner_key, pool.content, state.feedback.index)
        expansion = self._expansions.get(key) if shared else None
        if expansion is None:
            expansion = self._search(episode, pool, state.feedback)
            if shared:
                self._expansions[key] = expansion
        if episode.rule is None and expansion.pool is not None:
            try:
                episode.expanded = self._rank(
                    episode.ranker,
                    None,
                    expansion.pool,
                    state.feedback,
                    self.session_query,
                )
            except SkippedRequest:
                episode.expanded = None
        return expansion

    def _search(self, episode: _Episode, pool: _Pool, feedback: _Labels) -> _Expansion:
        refiner = episode.refiner
        try:
            if episode.refiner_key is not None:
                refined = self.memo.refine_pool(refiner, pool, feedback.labels, feedback.items)
            else:
                refined = refiner.refine(self.session_query, list(pool.objects), feedback.labels)
        except SkippedRequest:
            return _Expansion(None, 0, None, 0)
        limit = refined.limit or self.depth
        try:
            found = self.provider.search(refined.query, limit=limit)
        except SkippedRequest:
            return _Expansion(refined, limit, None, 0)
        grown, added = self._grow(pool, found)
        return _Expansion(refined, limit, grown, added)

    def _grow(self, pool: _Pool, found: Sequence[Evidence]) -> tuple[_Pool, int]:
        """The candidates after a search answered ``found`` (SearchSession.expand)."""
        key = (pool.content, id(found))
        grown = self._grown.get(key)
        if grown is None:
            held = set(pool.keys)
            new = [item for item in dedupe(found) if item.key not in held]
            merged = self.memo.pool(dedupe([*pool.objects, *new]))
            grown = self._grown[key] = (merged, len(new), found)  # found kept: its id is a key
        return grown[0], grown[1]

    def _record(
        self,
        round_: int,
        step: _Step,
        before: _Ranked,
        rerank: _Ranked,
        expansion: _Expansion,
        expanded: _Ranked | None,
        breakdown: list[dict[str, Any]] | None,
    ) -> dict[str, Any]:
        """The round's record: its marks, the lists shown before and after, the refined
        query; one per distinct content of it (a breakdown's record is the episode's own)."""
        key = (
            step.index,
            before.index,
            rerank.index,
            id(expansion),
            -1 if expanded is None else expanded.index,
        )
        record = self._records.get(key) if breakdown is None else None
        if record is None:
            record = {
                "round": round_,
                "marks": step.marks,
                "before": before.head(),
                "after_rerank": rerank.head(),
                "refined_query": None,
                "added_terms": [],
                "added": 0,
                "after_expand": None,
            }
            if breakdown is not None:
                record["breakdown"] = breakdown
            if expanded is not None:
                refined = expansion.refined
                assert refined is not None
                weights = getattr(refined, "weights", None)
                if weights:  # refiners that weigh terms (term Rocchio) explain their choice
                    record["term_weights"] = [[term, weight] for term, weight in weights]
                record.update(
                    refined_query=refined.query,
                    added_terms=list(refined.added_terms),
                    added=expansion.added,
                    after_expand=expanded.head(),
                )
            if breakdown is None:
                self._records[key] = record
        return record

    # --- evaluation -----------------------------------------------------------------------

    def _item(self, ranked: _Ranked, partner: _Ranked | None, state: _State) -> int:
        """The number of one stage's scoring: ``ranked``'s list in ``state``, cut to the
        length of ``partner``'s (the feedback stage it stands beside) in each mode; its
        rows of :meth:`_evaluate`'s matrix are ``number * _SHAPES + mode code``."""
        key = (ranked.index, -1 if partner is None else partner.index, state.index)
        found = self._items.get(key)
        if found is None:
            # the partner's own item (uncut) first: its lengths are the cut
            beside = -1 if partner is None else self._item(partner, None, state)
            found = self._items[key] = len(self._items)
            self._item_parts += (*key, beside)
        return found

    def _evaluate(
        self, residual: bool, frozen: bool
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.intp]]:
        """The measures of every item (:meth:`_item`) in each shape, from one grade matrix
        (:func:`~evidence_bench.evaluation.measures.evaluate_grades`): the distinct rows of
        values, and for each (item, shape), ``number * _SHAPES + code``, its row there.

        - as it is: the ranking, cut to its partner's length, on the full judgments;
        - residual (Salton & Buckley 1990): the ranking without the documents examined
          before the round, cut to the partner's residual length, on the judgments without
          them (``residual``: the run has the mode; else those rows are left at 0 and never
          read, as are the residual rows of a state with nothing relevant left);
        - frozen: the pinned keys in position order, then the residual list, cut to the
          partner's frozen length (pins that are not positions 1..p:
          :func:`~evidence_bench.protocol.episode.frozen_order`, one list at a time), on
          the full judgments.

        The rankings become one code matrix over the query's keys and the examined
        documents one mask per state, so each shape is a few array operations; a grade
        matrix holds the same grades, in the same ranks, as the lists
        it stands for (zero past each list's end), so the values are its floats, bit for bit.
        """
        measures = self.memo.measures
        items = self._items
        count = len(items)
        if not count:
            return np.zeros((0, len(measures)), dtype=np.float64), np.zeros(0, dtype=np.intp)
        keyed = np.array(self._item_parts, dtype=np.intp).reshape(count, 4)
        which_ranking, which_partner, which_state = keyed[:, 0], keyed[:, 1], keyed[:, 2]
        beside = keyed[:, 3]
        rankings, states = self.rankings, self.states
        # every key of the query as a code; `none` pads the ragged rows (grade 0, examined)
        every = [ranked.keys for ranked in rankings]
        seen_keys = [state.examined for state in states]  # shown: in a ranking already
        code = {key: number for number, key in enumerate(dict.fromkeys(chain(*every, *seen_keys)))}
        lengths = np.fromiter(map(len, every), dtype=np.intp, count=len(every))
        flat = np.fromiter(map(code.__getitem__, chain(*every)), np.intp, int(lengths.sum()))
        prefixes = [list(map(code.__getitem__, s.prefix or ())) for s in states]
        examined = [list(map(code.__getitem__, keys)) for keys in seen_keys]
        none = len(code)
        width = int(lengths.max())
        matrix = np.full((len(rankings), width), none, dtype=np.intp)
        matrix[np.arange(width) < lengths[:, None]] = flat
        ordered = np.sort(matrix, axis=1)
        twice = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != none)
        for number in np.flatnonzero(twice.any(axis=1)).tolist():  # as evaluate_many refuses
            evaluate_many([rankings[number].keys], self.judgments.prepared, measures)
        grades = self.judgments.grades
        positive = {number: g for key, number in code.items() if (g := grades.get(key, 0)) > 0}
        # the lists' grades and judgments are compared as bytes: as few as hold them
        small = max([0, *positive.values()]) < 128 and len(states) < 127
        kind = np.int8 if small else np.int64
        grade = np.zeros(none + 1, dtype=kind)
        grade[list(positive)] = list(positive.values())
        seen = np.zeros((len(states), none + 1), dtype=bool)
        seen[:, none] = True
        seen[
            np.repeat(np.arange(len(states)), [len(e) for e in examined]),
            np.array([c for e in examined for c in e], dtype=np.intp),
        ] = True
        pinned = np.array([len(p) for p in prefixes], dtype=np.intp)
        held = np.full((len(states), int(pinned.max()) if len(pinned) else 0), none, np.intp)
        held[np.arange(held.shape[1]) < pinned[:, None]] = np.array(
            [c for p in prefixes for c in p], dtype=np.intp
        )

        keys = matrix[which_ranking]
        left = ~seen[which_state[:, None], keys]  # kept in the residual list
        remaining = left.sum(axis=1)
        cut = which_partner >= 0
        partner = np.where(cut, beside, np.arange(count))  # its own item: no cut
        full = np.minimum(lengths[which_ranking], lengths[which_ranking[partner]])
        remaining = np.minimum(remaining, remaining[partner])
        before = pinned[which_state]
        span = width + max(len(state.pinned) for state in states)  # frozen_order's longest
        # each (item, shape): its judgments (column 0: their slot in `judged`), its grades
        shaped = np.zeros((count, _SHAPES, 1 + span), dtype=kind)
        judged: list[QueryJudgments] = [self.judgments.prepared]
        if residual:
            slots: dict[int, int] = {}  # states that examined the same documents share one
            of_state = {}
            for s in set(which_state.tolist()):
                qrels = self._residual(states[s])
                of_state[s] = slots.setdefault(id(qrels), len(judged))
                if of_state[s] == len(judged):
                    judged.append(qrels)
            shaped[:, _RESIDUAL, 0] = [of_state[s] for s in which_state.tolist()]
        graded = grade[keys]
        shaped[:, _AS_IS, 1 : 1 + width] = np.where(np.arange(width) < full[:, None], graded, 0)
        position = np.cumsum(left, axis=1, dtype=np.int32)  # 1 + rank in the residual list
        rows, columns = np.nonzero(left & (position <= remaining[:, None]))
        at = position[rows, columns]
        if residual:
            shaped[rows, _RESIDUAL, at] = graded[rows, columns]
        if frozen:
            shaped[:, _FROZEN, 1 : 1 + held.shape[1]] = grade[held[which_state]]
            shaped[rows, _FROZEN, before[rows] + at] = graded[rows, columns]
            for item in np.flatnonzero([states[s].prefix is None for s in which_state.tolist()]):
                row = self._frozen_row(keyed[item].tolist(), code, grade, span)
                shaped[item, _FROZEN, 1:] = row
        # Most rows repeat another's grades and judgments (a list without relevant documents,
        # controls that coincide): each distinct row is scored once.
        packed = shaped.reshape(count * _SHAPES, 1 + span)
        as_bytes = packed.view(np.dtype((np.void, packed.shape[1] * packed.itemsize))).ravel()
        _, first, inverse = np.unique(as_bytes, return_index=True, return_inverse=True)
        distinct = packed[first]
        values = evaluate_grades(
            distinct[:, 1:].astype(np.int64), judged, distinct[:, 0].astype(np.intp), measures
        )
        return values, inverse.reshape(-1)

    def _frozen_row(
        self, item: list[int], code: dict[str, int], grade: npt.NDArray[Any], span: int
    ) -> npt.NDArray[Any]:
        """The frozen grades of one item whose state's pins are not positions 1..p."""
        ranking, partner, number, _ = item  # (ranking, partner, state, partner item)
        state = self.states[number]
        keys = frozen_order(self.rankings[ranking].keys, state.pinned)
        if partner >= 0:
            keys = keys[: len(frozen_order(self.rankings[partner].keys, state.pinned))]
        row = np.zeros(span, dtype=grade.dtype)
        found = grade[[code[key] for key in keys]]
        row[: len(found)] = found  # span: the longest ranking and every pin (frozen_order)
        return row
