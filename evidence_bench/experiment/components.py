"""Config to engine parts: rankers, refiners and user policies by name.

The registries are the closed sets a config may name; an unknown name fails listing them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from evidence_bench.engine.base import Ranker, Refiner
from evidence_bench.engine.ranking import ProviderOrderRanker, TfidfRocchioRanker
from evidence_bench.engine.refiner import LexicalRefiner
from evidence_bench.engine.text import STOP_WORDS, Analyzer
from evidence_bench.errors import ConfigurationError
from evidence_bench.simulation.users import UserPolicy, make_policy

__all__ = [
    "RANKERS",
    "RANKER_PARAMS",
    "REFINERS",
    "EngineConfig",
    "make_ranker",
    "make_refiner",
    "make_user",
]

#: Ranker name -> (factory, the config keys it takes).
RANKERS: dict[str, Callable[..., Ranker]] = {
    "tfidf_rocchio": TfidfRocchioRanker,
    "provider_order": ProviderOrderRanker,
}
RANKER_PARAMS: dict[str, tuple[str, ...]] = {
    "tfidf_rocchio": ("alpha", "beta", "gamma"),
    "provider_order": (),
}
REFINERS: dict[str, Callable[..., Refiner]] = {"lexical": LexicalRefiner}
REFINER_PARAMS: dict[str, tuple[str, ...]] = {"lexical": ("max_terms",)}


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """One engine configuration of a run: a ranker and a refiner with their parameters."""

    config_id: str
    ranker: str
    refiner: str
    ranker_params: tuple[tuple[str, float], ...]
    refiner_params: tuple[tuple[str, int], ...]
    stemmer: str | None = None
    stop_words: bool = True

    @property
    def analyzer(self) -> Analyzer:
        return Analyzer(stop_words=STOP_WORDS if self.stop_words else None, stemmer=self.stemmer)

    @property
    def role(self) -> str:
        """``baseline`` where feedback cannot change the ranking, else ``feedback``."""
        return "baseline" if self.ranker == "provider_order" else "feedback"

    @property
    def label(self) -> str:
        params = " ".join(f"{name}={value:g}" for name, value in self.ranker_params)
        return f"{self.ranker} {params}".strip()

    def params(self) -> dict[str, Any]:
        return {
            **dict(self.ranker_params),
            **dict(self.refiner_params),
            "stemmer": self.stemmer or "none",
            "stop_words": self.stop_words,
        }


def _pick(kind: str, name: str, registry: Mapping[str, object]) -> None:
    if name not in registry:
        valid = ", ".join(sorted(registry))
        raise ConfigurationError(f"{kind}.name={name!r} is not a known {kind} (valid: {valid})")


def engine_config(
    config_id: str,
    ranker: Mapping[str, Any],
    refiner: Mapping[str, Any],
    analyzer: Mapping[str, Any] | None = None,
) -> EngineConfig:
    """Validate names against the registries and keep only the parameters each part takes."""
    _pick("ranker", ranker["name"], RANKERS)
    _pick("refiner", refiner["name"], REFINERS)
    ranker_params = tuple((key, float(ranker[key])) for key in RANKER_PARAMS[ranker["name"]])
    refiner_params = tuple((key, int(refiner[key])) for key in REFINER_PARAMS[refiner["name"]])
    analyzer = analyzer or {}
    stemmer = analyzer.get("stemmer")
    Analyzer(stemmer=stemmer)  # an unknown stemmer fails here, listing the valid ones
    return EngineConfig(
        config_id,
        ranker["name"],
        refiner["name"],
        ranker_params,
        refiner_params,
        stemmer=stemmer,
        stop_words=bool(analyzer.get("stop_words", True)),
    )


def make_ranker(config: EngineConfig, *, feedback: bool = True) -> Ranker:
    """The configured ranker; ``feedback=False`` switches its feedback terms off (the control)."""
    params: dict[str, Any] = dict(config.ranker_params)
    if not feedback and config.ranker == "tfidf_rocchio":
        params.update(beta=0.0, gamma=0.0)
    if config.ranker != "provider_order":
        params["analyzer"] = config.analyzer
    return RANKERS[config.ranker](**params)


def make_refiner(config: EngineConfig) -> Refiner:
    return REFINERS[config.refiner](**dict(config.refiner_params), analyzer=config.analyzer)


def make_user(name: str, conf: Mapping[str, Any]) -> UserPolicy:
    """A simulated user from a ``policies.<name>`` config; passes only the fields its kind takes."""
    from evidence_bench.simulation.users import POLICIES

    kind = conf["kind"]
    cls = POLICIES.get(kind)
    if cls is None:
        valid = ", ".join(sorted(POLICIES))
        raise ConfigurationError(f"policies.{name}.kind={kind!r} is not known (valid: {valid})")
    accepted = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    params = {key: value for key, value in conf.items() if key in accepted and key != "kind"}
    try:
        return make_policy(kind, **params)
    except ConfigurationError as exc:
        raise ConfigurationError(f"policies.{name}: {exc}") from exc
