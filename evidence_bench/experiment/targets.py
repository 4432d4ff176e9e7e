"""A ranker, refiner, simulated user or search provider from the user's code: a config's
``_target_``, built at plan time (:mod:`evidence_bench._targets`) and checked against its
seam's protocol. It then runs inside a guard holding it to the protocol's contract on
every call (a ranking is a permutation of the candidates, a search answers at most
``limit`` distinct results, ...), so a broken part stops the run naming its key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass, field, fields
from typing import Any

from evidence_bench._targets import TARGET, build, call_params, check_protocol
from evidence_bench.collections.beir import Collection
from evidence_bench.engine.base import (
    Feedback,
    Label,
    Ranker,
    RefinedQuery,
    Refiner,
    SearchProvider,
)
from evidence_bench.errors import ConfigurationError
from evidence_bench.evidence import Evidence, renumber
from evidence_bench.users.policies import LabelKind, Mark, UserPolicy

__all__ = [
    "RANKER_KEYS", "REFINER_KEYS", "USER_KEYS", "USER_OFFERED", "UserJudge", "UserProvider",
    "UserRanker", "UserRefiner", "is_users", "part_params", "schema_defaults", "user_judge",
    "user_provider", "user_ranker", "user_refiner",
]  # fmt: skip

#: The keys of ``ranker`` the harness applies to any ranker (never passed to a target)
RANKER_KEYS = ("name", "boost_relevant", "evidence", "idf")
#: ... of ``refiner``
REFINER_KEYS = ("name", "evidence", "idf", "expand_depth")
#: ... of a ``policies`` entry: its kind, and ``params`` (its own keys, passed as they are)
USER_KEYS = ("kind", "params")
#: the keys a run sets on every user, passed to a target that takes them
USER_OFFERED = ("seed", "depth")


def is_users(conf: Mapping[str, Any]) -> bool:
    """Whether a part's config names a target of the user's."""
    return bool(conf.get(TARGET))


def part_params(
    where: str,
    conf: Mapping[str, Any],
    schema: type,
    harness: Sequence[str],
    offered: Sequence[str] = (),
) -> tuple[tuple[str, Any], ...]:
    """The parameters ``conf``'s target is called with (:func:`~evidence_bench._targets.
    call_params`, against ``schema``'s defaults)."""
    defaults = schema_defaults(schema)
    return call_params(where, conf, harness=harness, defaults=defaults, offered=offered)


def schema_defaults(schema: type) -> dict[str, Any]:
    """Each key of a config schema (a dataclass) and its default."""
    return {
        spec.name: spec.default_factory() if callable(spec.default_factory) else spec.default
        for spec in fields(schema)
    }


def _at(where: str, target: str) -> str:
    return f"{where}.{TARGET}={target}"


def _results(at: str, results: object, what: str) -> Sequence[Evidence]:
    """``results`` if it is a list of :class:`Evidence`, no result twice."""
    if not isinstance(results, Sequence) or not all(isinstance(r, Evidence) for r in results):
        raise ConfigurationError(f"{at} did not return a list of {what}")
    seen: set[str] = set()
    for item in results:
        if item.key in seen:
            raise ConfigurationError(f"{at} returned {item.url!r} twice")
        seen.add(item.key)
    return results


@dataclass(eq=False)
class UserRanker:
    """A user's ranker held to :class:`~evidence_bench.engine.base.Ranker`'s contract;
    ``feedback=False``: the no-feedback control, the ranker given empty feedback. Not
    frozen (the protocol's ``name`` is a plain attribute); treat it as immutable."""

    inner: Ranker
    target: str
    feedback: bool = True
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = str(self.inner.name)

    def rank(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> list[Evidence]:
        """The inner ranking of ``candidates``, checked to be a permutation of them, with
        ``rank`` renumbered 1..n."""
        ranked = self.inner.rank(query, list(candidates), feedback if self.feedback else {})
        at = f"{_at('ranker', self.target)}: rank() for query {query!r}"
        results = _results(at, ranked, "the candidates (Evidence)")
        held = {item.key for item in candidates}
        for item in results:
            if item.key not in held:
                raise ConfigurationError(f"{at} returned {item.url!r}, not a candidate")
        if len(results) != len(held):
            raise ConfigurationError(
                f"{at} returned {len(results)} of the {len(held)} candidates (it must return all)"
            )
        return renumber(results)


@dataclass(frozen=True, eq=False)
class UserRefiner:
    """A user's refiner held to :class:`~evidence_bench.engine.base.Refiner`'s contract."""

    inner: Refiner
    target: str

    def refine(
        self, query: str, candidates: Sequence[Evidence], feedback: Feedback
    ) -> RefinedQuery:
        """The inner refined query, checked to be a :class:`RefinedQuery`."""
        refined = self.inner.refine(query, list(candidates), feedback)
        if not isinstance(refined, RefinedQuery):
            raise ConfigurationError(
                f"{_at('refiner', self.target)}: refine() for query {query!r} returned "
                f"{type(refined).__name__}, not a RefinedQuery"
            )
        return refined


@dataclass(frozen=True, eq=False)
class UserJudge:
    """A user's simulated user held to :class:`~evidence_bench.users.policies.UserPolicy`'s
    contract: each mark a :class:`Mark` of a displayed result it had not examined, once."""

    inner: UserPolicy
    where: str
    target: str

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def expects(self) -> frozenset[LabelKind]:
        return frozenset(self.inner.expects)

    @property
    def seed(self) -> int | None:
        """The inner user's seed, if it takes one (a run over seeds runs it at each)."""
        return getattr(self.inner, "seed", None)

    def judge(
        self,
        *,
        query_id: str,
        round: int,
        displayed: Sequence[Evidence],
        judgments: Mapping[str, int],
        examined: Set[str],
    ) -> list[Mark]:
        """The inner user's marks, checked."""
        marks = self.inner.judge(
            query_id=query_id,
            round=round,
            displayed=displayed,
            judgments=judgments,
            examined=examined,
        )
        at = f"{_at(self.where, self.target)}: judge() for query {query_id!r} round {round}"
        shown = {item.key for item in displayed}
        seen: set[str] = set()
        for mark in marks:
            if not isinstance(mark, Mark) or not (
                mark.label is None or isinstance(mark.label, Label)
            ):
                raise ConfigurationError(f"{at} returned {mark!r}, not a Mark(key, Label|None)")
            if mark.key not in shown:
                raise ConfigurationError(f"{at} marked {mark.key!r}, which was not displayed")
            if mark.key in examined or mark.key in seen:
                raise ConfigurationError(f"{at} marked {mark.key!r} again")
            seen.add(mark.key)
        return list(marks)


def user_ranker(target: str, params: tuple[tuple[str, Any], ...], *, feedback: bool) -> Ranker:
    """The user's ranker ``target`` built with ``params``, checked and guarded."""
    ranker = build("ranker", target, params)
    check_protocol("ranker", target, ranker, Ranker)
    return UserRanker(ranker, target, feedback)


def user_refiner(target: str, params: tuple[tuple[str, Any], ...]) -> Refiner:
    """The user's refiner ``target`` built with ``params``, checked and guarded."""
    refiner = build("refiner", target, params)
    check_protocol("refiner", target, refiner, Refiner)
    return UserRefiner(refiner, target)


def user_judge(where: str, target: str, params: tuple[tuple[str, Any], ...]) -> UserPolicy:
    """The user's simulated user ``target`` (at config key ``where``), checked and guarded."""
    user = build(where, target, params)
    check_protocol(where, target, user, UserPolicy)
    return UserJudge(user, where, target)


@dataclass(frozen=True, eq=False)
class UserProvider:
    """A user's search provider held to :class:`~evidence_bench.engine.base.SearchProvider`'s
    contract: at most ``limit`` results, each an :class:`Evidence` and each once."""

    inner: SearchProvider
    target: str

    def search(self, query: str, *, limit: int) -> list[Evidence]:
        """The inner provider's results, checked, ``rank`` renumbered 1..n."""
        at = f"{_at('search_provider', self.target)}: search() for query {query!r}"
        results = self.inner.search(query, limit=limit)
        if isinstance(results, Sequence) and len(results) > limit:
            raise ConfigurationError(f"{at} returned {len(results)} results (limit={limit})")
        return renumber(_results(at, results, "Evidence"))


def user_provider(
    target: str, params: tuple[tuple[str, Any], ...], collection: Collection
) -> SearchProvider:
    """The user's search provider ``target``, built with ``params`` (and the query set's
    ``collection`` where it takes one), checked and guarded."""
    provider = build("search_provider", target, params, {"collection": collection})
    check_protocol("search_provider", target, provider, SearchProvider)
    return UserProvider(provider, target)
