"""Config to engine parts: rankers, refiners and user policies by name.

The registries are the closed sets a config may name; an unknown name fails listing them.
Each entry says which config keys its part takes, which of them label a config, and how
to switch its feedback off for the no-feedback control. :data:`USERS` holds every user
kind: the judging policies (users/policies.py) and the click models (users/clicks.py).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from evidence_bench._targets import TARGET, frozen
from evidence_bench.engine.background import (
    IDF_SOURCES,
    NO_BACKGROUND,
    Background,
    BackgroundRocchioRanker,
)
from evidence_bench.engine.base import Ranker, Refiner
from evidence_bench.engine.boost import BoostRelevant
from evidence_bench.engine.evidence_mode import (
    NO_PAGES,
    EvidenceMode,
    PageEvidenceRanker,
    PageEvidenceRefiner,
    PageSource,
    evidence_mode,
)
from evidence_bench.engine.livefetch import LiveFetchRanker
from evidence_bench.engine.params import part_key
from evidence_bench.engine.ranking import ProviderOrderRanker, TfidfRocchioRanker
from evidence_bench.engine.refiner import ExpansionDepth, LexicalRefiner
from evidence_bench.engine.term_rocchio import TermRocchioRefiner
from evidence_bench.engine.text import STOP_WORDS, Analyzer
from evidence_bench.errors import ConfigurationError
from evidence_bench.experiment.config import PolicyConf, RankerConf, RefinerConf
from evidence_bench.experiment.targets import (
    RANKER_KEYS,
    REFINER_KEYS,
    USER_KEYS,
    USER_OFFERED,
    is_users,
    part_params,
    schema_defaults,
    user_judge,
    user_ranker,
    user_refiner,
)
from evidence_bench.users.clicks import CLICK_MODELS
from evidence_bench.users.policies import POLICIES, UserPolicy
from evidence_bench.web.page_text import require_pages

if TYPE_CHECKING:
    import httpx

    from evidence_bench.web.brave import BraveProvider

__all__ = [
    "PARAM_DEFAULTS", "RANKERS", "REFINERS", "USERS", "EngineConfig", "Part", "effective_key",
    "engine_config", "make_ranker", "make_refiner", "make_user", "replay_provider", "user_params",
]  # fmt: skip

_ROCCHIO = ("alpha", "beta", "gamma")
_MAX_TERMS = 4
#: configs.csv's value of a parameter a config does not list (evidence is listed only
#: where some part reads pages, so snippet-only runs keep their columns)
PARAM_DEFAULTS = {
    "evidence": "snippet",
    "refiner_evidence": "snippet",
    "idf": "candidates",
    "refiner_idf": "candidates",
    "refiner_expand_depth": "none",
}
_NO_FEEDBACK = {"beta": 0.0, "gamma": 0.0}


@dataclass(frozen=True)
class Part:
    """A ranker or refiner a config can name."""

    factory: Callable[..., Any]
    params: tuple[str, ...] = ()
    label: tuple[str, ...] = ()
    #: parameter values that switch feedback off (the no-feedback control)
    feedback_off: Mapping[str, float] = field(default_factory=dict)
    analyzed: bool = True


def _vector_rocchio(
    *, alpha: float, beta: float, gamma: float, embedder: str, dimensions: int, analyzer: Analyzer
) -> Ranker:
    from evidence_bench.engine.embedding import DenseEmbedder, LsaEmbedder
    from evidence_bench.engine.vector_rocchio import VectorRocchioRanker

    if embedder == "lsa":
        chosen: Any = LsaEmbedder(dimensions=dimensions, analyzer=analyzer)
    elif embedder == "dense":
        chosen = DenseEmbedder()
    else:
        raise ConfigurationError(f"ranker.embedder={embedder!r} is not valid (valid: dense, lsa)")
    return VectorRocchioRanker(alpha=alpha, beta=beta, gamma=gamma, embedder=chosen)


_LIVEFETCH = (
    "w_r", "w_f", "w_t", "w_dup", "half_life_days", "as_of", "neutral_freshness",
    "default_trust", "allow_domains", "deny_domains", *_ROCCHIO,
)  # fmt: skip
RANKERS: dict[str, Part] = {
    "tfidf_rocchio": Part(TfidfRocchioRanker, _ROCCHIO, _ROCCHIO, _NO_FEEDBACK),
    "provider_order": Part(ProviderOrderRanker, analyzed=False),
    "livefetch": Part(
        LiveFetchRanker, _LIVEFETCH, ("w_r", "w_f", "w_t", "w_dup", "beta", "gamma"), _NO_FEEDBACK
    ),
    "vector_rocchio": Part(
        _vector_rocchio,
        (*_ROCCHIO, "embedder", "dimensions"),
        (*_ROCCHIO, "embedder"),
        _NO_FEEDBACK,
    ),
}
REFINERS: dict[str, Part] = {
    "lexical": Part(LexicalRefiner, ("max_terms",), ()),
    "term_rocchio": Part(TermRocchioRefiner, ("max_terms", "beta", "gamma"), ("beta", "gamma")),
}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """One engine configuration of a run: a ranker and a refiner with their parameters."""

    config_id: str
    ranker: str
    refiner: str
    ranker_params: tuple[tuple[str, Any], ...]
    refiner_params: tuple[tuple[str, Any], ...]
    stemmer: str | None = None
    stop_words: bool = True
    boost_relevant: bool = False
    #: what the ranker and the refiner read of a result (engine/evidence_mode.py)
    evidence: str = "snippet"
    refiner_evidence: str = "snippet"
    #: where the ranker's and the refiner's idf come from (engine/background.py)
    idf: str = "candidates"
    refiner_idf: str = "candidates"
    #: how many results the refined query fetches (None: the experiment's depth)
    expand_depth: int | None = None
    #: the ranker or refiner is the user's (experiment/targets.py): ``ranker`` or
    #: ``refiner`` is then its ``_target_``, and its params the keys of its config it takes
    ranker_target: bool = False
    refiner_target: bool = False

    @property
    def uses_background(self) -> bool:
        """Whether the ranker or the refiner takes its idf from the background sample."""
        return "background" in (self.idf, self.refiner_idf)

    @property
    def reads_pages(self) -> bool:
        """Whether the ranker or the refiner reads the pages behind the results."""
        return self.evidence != "snippet" or self.refiner_evidence != "snippet"

    @property
    def analyzer(self) -> Analyzer:
        return Analyzer(stop_words=STOP_WORDS if self.stop_words else None, stemmer=self.stemmer)

    @property
    def role(self) -> str:
        """``baseline`` where feedback cannot change the ranking, else ``feedback``."""
        fixed = self.ranker == "provider_order" and not self.boost_relevant
        return "baseline" if fixed else "feedback"

    @property
    def label(self) -> str:
        ranker = dict(self.ranker_params)
        parts = [self.ranker + ("+boost" if self.boost_relevant else "")]
        shown_ranker = ranker if self.ranker_target else RANKERS[self.ranker].label
        parts += [f"{key}={_show(ranker[key])}" for key in shown_ranker]
        refiner = dict(self.refiner_params)
        if self.refiner != "lexical":
            keys = refiner if self.refiner_target else REFINERS[self.refiner].label
            shown = " ".join(f"{k}={_show(refiner[k])}" for k in keys)
            parts.append(f"· {self.refiner} {shown}".rstrip())
        if not self.refiner_target and refiner.get("max_terms", _MAX_TERMS) != _MAX_TERMS:
            parts.append(f"· max_terms={refiner['max_terms']}")
        if self.reads_pages:
            same = self.evidence == self.refiner_evidence
            parts.append(
                f"· {self.evidence} evidence"
                if same
                else f"· ranker reads {self.evidence}, refiner {self.refiner_evidence}"
            )
        if self.uses_background:
            parts.append(f"· idf={self.idf}/{self.refiner_idf}")
        if self.expand_depth is not None:
            parts.append(f"· expand_depth={self.expand_depth}")
        return " ".join(parts)

    def params(self) -> dict[str, Any]:
        """Every parameter, refiner ones prefixed ``refiner_`` (configs.csv columns); the
        evidence modes only where some part reads pages (else see :data:`PARAM_DEFAULTS`)."""
        pages: dict[str, Any] = (
            {"evidence": self.evidence, "refiner_evidence": self.refiner_evidence}
            if self.reads_pages
            else {}
        )
        if self.uses_background:
            pages.update(idf=self.idf, refiner_idf=self.refiner_idf)
        if self.expand_depth is not None:
            pages["refiner_expand_depth"] = self.expand_depth
        return {
            **dict(self.ranker_params),
            "boost_relevant": self.boost_relevant,
            **{f"refiner_{key}": value for key, value in self.refiner_params},
            "stemmer": self.stemmer or "none",
            "stop_words": self.stop_words,
            **pages,
        }


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _pick(kind: str, name: str, registry: Mapping[str, Part]) -> Part:
    if name not in registry:
        valid = ", ".join(sorted(registry))
        raise ConfigurationError(f"{kind}.name={name!r} is not a known {kind} (valid: {valid})")
    return registry[name]


def engine_config(
    config_id: str,
    ranker: Mapping[str, Any],
    refiner: Mapping[str, Any],
    analyzer: Mapping[str, Any] | None = None,
) -> EngineConfig:
    """Validate names against the registries and keep only the parameters each part takes;
    a part with a ``_target_`` is the user's (:mod:`evidence_bench.experiment.targets`)."""
    ranker_name, ranker_params = _part_params("ranker", ranker, RANKERS, RankerConf)
    refiner_name, refiner_params = _part_params("refiner", refiner, REFINERS, RefinerConf)
    analyzer = analyzer or {}
    stemmer = analyzer.get("stemmer")
    Analyzer(stemmer=stemmer)  # an unknown stemmer fails here, listing the valid ones
    config = EngineConfig(
        config_id,
        ranker_name,
        refiner_name,
        ranker_params,
        refiner_params,
        stemmer=stemmer,
        stop_words=bool(analyzer.get("stop_words", True)),
        boost_relevant=bool(ranker.get("boost_relevant", False)),
        evidence=evidence_mode("ranker.evidence", ranker.get("evidence", "snippet")).value,
        refiner_evidence=evidence_mode(
            "refiner.evidence", refiner.get("evidence", "snippet")
        ).value,
        idf=_choice("ranker.idf", str(ranker.get("idf", "candidates")), IDF_SOURCES),
        refiner_idf=_choice("refiner.idf", str(refiner.get("idf", "candidates")), IDF_SOURCES),
        expand_depth=_expand_depth(refiner.get("expand_depth")),
        ranker_target=bool(ranker.get(TARGET)),
        refiner_target=bool(refiner.get(TARGET)),
    )
    if config.idf == "background" and config.ranker != "tfidf_rocchio":
        raise ConfigurationError(
            f"ranker.idf=background is for tfidf_rocchio, not {config.ranker!r}"
        )
    if config.refiner_idf == "background" and config.refiner != "lexical":
        raise ConfigurationError(f"refiner.idf=background is for lexical, not {config.refiner!r}")
    if config.uses_background and not config.reads_pages:
        raise ConfigurationError(
            "idf=background reads the pages of every query's first results: "
            "set ranker.evidence or refiner.evidence to page or both"
        )
    if config.reads_pages:
        key, mode = (
            ("ranker.evidence", config.evidence)
            if config.evidence != "snippet"
            else ("refiner.evidence", config.refiner_evidence)
        )
        require_pages(f"{key}={mode}")
    make_ranker(config)  # a bad parameter value fails now, not in a worker
    make_refiner(config)
    return config


def _part_params(
    kind: str, conf: Mapping[str, Any], registry: Mapping[str, Part], schema: type
) -> tuple[str, tuple[tuple[str, Any], ...]]:
    """A part's name and the parameters it takes: a shipped part's from its registry entry,
    a user's (``_target_``) the keys of its config its signature takes."""
    if is_users(conf):
        harness = RANKER_KEYS if kind == "ranker" else REFINER_KEYS
        params = part_params(kind, conf, schema, harness)
        return str(conf[TARGET]), tuple((key, frozen(value)) for key, value in params)
    part = _pick(kind, str(conf["name"]), registry)
    return str(conf["name"]), tuple((key, frozen(conf[key])) for key in part.params)


def _choice(key: str, value: str, valid: Sequence[str]) -> str:
    """``value``, when it is one of ``valid``; else a one-line error naming ``key``."""
    if value not in valid:
        raise ConfigurationError(f"{key}={value!r} is not valid (valid: {', '.join(valid)})")
    return value


def _expand_depth(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 200:
        raise ConfigurationError(
            f"refiner.expand_depth={value!r} must be an integer from 1 to 200 (or null)"
        )
    return value


def make_ranker(
    config: EngineConfig,
    *,
    feedback: bool = True,
    pages: PageSource | None = None,
    background: Background | None = None,
) -> Ranker:
    """The configured ranker; ``feedback=False`` switches its feedback terms off (the control).

    ``pages``: where a ranker with ``evidence`` page or both reads them (the run's page
    cassette); without it such a ranker can be built and keyed but not run. ``background``:
    the sample an ``idf=background`` part takes its idf from (the same caveat).
    """
    mode = EvidenceMode(config.evidence)
    ranker: Ranker
    if config.ranker_target:  # the user's: its control is itself under empty feedback
        ranker = user_ranker(config.ranker, config.ranker_params, feedback=feedback)
    else:
        ranker = _shipped_ranker(config, feedback, mode, background)
    if mode is not EvidenceMode.SNIPPET:
        ranker = PageEvidenceRanker(ranker, mode, pages or NO_PAGES)
    return BoostRelevant(ranker) if config.boost_relevant and feedback else ranker


def _shipped_ranker(
    config: EngineConfig, feedback: bool, mode: EvidenceMode, background: Background | None
) -> Ranker:
    part = RANKERS[config.ranker]
    params: dict[str, Any] = dict(config.ranker_params)
    if not feedback:
        params.update(part.feedback_off)
    if part.analyzed:
        params["analyzer"] = config.analyzer
    factory = part.factory
    if config.idf == "background":
        factory = BackgroundRocchioRanker
        params.update(background=background or NO_BACKGROUND, mode=mode)
    try:
        ranker: Ranker = factory(**params)
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"ranker {config.ranker!r}: {exc}") from exc
    return ranker


def make_refiner(
    config: EngineConfig, *, pages: PageSource | None = None, background: Background | None = None
) -> Refiner:
    """The configured refiner; ``pages`` and ``background`` as for :func:`make_ranker`."""
    mode = EvidenceMode(config.refiner_evidence)
    refiner: Refiner
    if config.refiner_target:
        refiner = user_refiner(config.refiner, config.refiner_params)
    else:
        part = REFINERS[config.refiner]
        params: dict[str, Any] = dict(config.refiner_params)
        if config.refiner_idf == "background":
            params.update(background=background or NO_BACKGROUND, mode=mode)
        try:
            refiner = part.factory(**params, analyzer=config.analyzer)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"refiner {config.refiner!r}: {exc}") from exc
    if mode is not EvidenceMode.SNIPPET:
        refiner = PageEvidenceRefiner(refiner, mode, pages or NO_PAGES)
    if config.expand_depth is not None:
        refiner = ExpansionDepth(refiner, config.expand_depth)
    return refiner


def effective_key(config: EngineConfig) -> Hashable:
    """What decides every result of an engine config: the kinds and effective parameters of
    its ranker, of its no-feedback control and of its refiner (each part's
    ``effective_params()``, which folds the settings its own math cannot tell apart, such
    as Rocchio weights that differ by a common factor).

    Configs with equal keys rank, refine and so score alike for every user, so a run runs
    one of them. The key is about the engine's math only: a gamma that a user who never
    marks a result irrelevant cannot move still tells two configs apart.
    """
    return (
        _key(config, "ranker") or part_key(make_ranker(config)),
        _key(config, "control") or part_key(make_ranker(config, feedback=False)),
        _key(config, "refiner") or part_key(make_refiner(config)),
    )


def _key(config: EngineConfig, part: str) -> Hashable | None:
    """A user part's key: its target and config (in key order, however the config listed
    them), with what the harness wraps it in (boost, page evidence, expansion depth); None
    for a shipped part."""
    if part == "refiner":
        if not config.refiner_target:
            return None
        params = tuple(sorted(config.refiner_params, key=lambda item: item[0]))
        return (TARGET, config.refiner, params, config.refiner_evidence, config.expand_depth)
    if not config.ranker_target:
        return None
    boost = config.boost_relevant and part == "ranker"
    params = tuple(sorted(config.ranker_params, key=lambda item: item[0]))
    return (TARGET, part, config.ranker, params, config.evidence, boost)


#: Every user kind a config may name (``policies.<name>.kind``): judges, then click models.
USERS: dict[str, type[UserPolicy]] = {**POLICIES, **CLICK_MODELS}

#: Keys a run sets on every user whatever its kind: the seed (the run's is added to it).
_SET_BY_RUN = frozenset({"kind", "seed"})


def user_params(kind: str) -> tuple[str, ...]:
    """The config keys a user kind takes (its fields), in declaration order; a kind no
    registry holds takes none the harness sets for it."""
    if kind not in USERS:
        return ()
    return tuple(spec.name for spec in fields(USERS[kind]))  # type: ignore[arg-type]


def make_user(name: str, conf: Mapping[str, Any]) -> UserPolicy:
    """A simulated user from a ``policies.<name>`` config; passes only the fields its kind
    takes. With ``_target_`` the user is the user's own, called with the keys it takes.

    A key the kind does not take must keep :class:`PolicyConf`'s default (a composed config
    holds every key); another value fails naming the key and the keys the kind takes, so
    ``policies.oracle.p_relevant=0.6`` is not dropped silently.
    """
    if is_users(conf):  # the user's own (experiment/targets.py)
        where = f"policies.{name}"
        taken = part_params(where, conf, PolicyConf, USER_KEYS, USER_OFFERED)
        own = tuple((str(key), frozen(value)) for key, value in (conf.get("params") or {}).items())
        if twice := sorted({key for key, _ in taken} & {key for key, _ in own}):
            raise ConfigurationError(
                f"{where}.params.{twice[0]}: given beside {where}.{twice[0]}; give it once"
            )
        return user_judge(where, str(conf[TARGET]), (*taken, *own))
    kind = conf["kind"]
    cls = USERS.get(kind)
    if cls is None:
        valid = ", ".join(sorted(USERS))
        raise ConfigurationError(f"policies.{name}.kind={kind!r} is not known (valid: {valid})")
    accepted = user_params(kind)
    defaults = schema_defaults(PolicyConf)
    for key, value in conf.items():
        if key in accepted or key in _SET_BY_RUN or value == defaults.get(key, value):
            continue
        raise ConfigurationError(
            f"policies.{name}.{key}={value!r}: kind {kind!r} does not take {key!r} "
            f"(it takes: {', '.join(accepted)})"
        )
    params = {key: value for key, value in conf.items() if key in accepted}
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigurationError(f"policies.{name}: {exc}") from exc
    except ConfigurationError as exc:
        raise ConfigurationError(f"policies.{name}: {exc}") from exc


def replay_provider(client: httpx.Client) -> BraveProvider:
    """The Brave provider of a replay: it asks ``client`` (a cassette store's replay
    transport) once per search, since a replayed answer is the same on a retry."""
    from evidence_bench.web.brave import BraveProvider, RetryPolicy
    from evidence_bench.web.cassettes import REPLAY_BASE_URL

    return BraveProvider(
        "replay", base_url=REPLAY_BASE_URL, http_client=client, retry=RetryPolicy(attempts=1)
    )
