"""Typed Hydra config schemas, registered in a ConfigStore.

Every group has a dataclass schema, so an override with a typo (``ranker.alhpa=1``) fails
naming the key, and a value of the wrong type fails naming the key and the value. Names
that select an implementation (``ranker.name``, ``policies.*.kind``) are checked against
the registries when the run starts, and the error lists the valid names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore

__all__ = [
    "AnalyzerConf",
    "EvalConf",
    "ExperimentConf",
    "PolicyConf",
    "QuerySetConf",
    "RankerConf",
    "RefinerConf",
    "ReplayConf",
    "RunConf",
    "compose",
    "register_configs",
]


@dataclass
class QuerySetConf:
    """A query set: a BEIR collection and the cassettes recorded for its queries."""

    name: str = "???"
    path: str = "???"
    cassettes: str = "???"
    #: ``collection``: judgments and a simulator come from ``path``; ``live``: recorded from
    #: live Brave, replay misses cannot be simulated.
    source: str = "collection"
    #: Use only the first N judged queries (None: all judged queries).
    limit: int | None = None


@dataclass
class RankerConf:
    """Every ranker's settings; a ranker reads only the keys it takes (components.RANKERS)."""

    name: str = "tfidf_rocchio"
    #: Rocchio weights (tfidf_rocchio, vector_rocchio, and livefetch's relevance part)
    alpha: float = 1.0
    beta: float = 0.75
    gamma: float = 0.15
    #: lift results the user marked relevant to the front, order kept (any ranker)
    boost_relevant: bool = False
    #: livefetch: S = w_r R + w_f F + w_t T - w_dup D
    w_r: float = 0.55
    w_f: float = 0.25
    w_t: float = 0.20
    w_dup: float = 0.35
    half_life_days: float = 7.0
    #: the fixed date freshness is measured against (never the wall clock)
    as_of: str = "2026-01-01"
    neutral_freshness: float = 0.5
    default_trust: float = 0.5
    allow_domains: list[str] = field(default_factory=list)
    deny_domains: list[str] = field(default_factory=list)
    #: vector_rocchio: lsa (no extra) or dense (pip install 'evidence_bench[dense]')
    embedder: str = "lsa"
    dimensions: int = 16


@dataclass
class AnalyzerConf:
    """The analyzer the ranker and the refiner share (they must see the same terms)."""

    #: A Snowball algorithm (english, porter, ...) or null for no stemming. English is the
    #: default because it raised residual nDCG@10 on both Cranfield and CACM.
    stemmer: str | None = "english"
    stop_words: bool = True


@dataclass
class RefinerConf:
    name: str = "lexical"
    max_terms: int = 4
    #: term_rocchio: w(t) = f_q(t) + beta mean f_rel(t) - gamma mean f_irr(t)
    beta: float = 0.75
    gamma: float = 0.15


@dataclass
class PolicyConf:
    """A simulated user; fields a kind does not use are ignored by it."""

    kind: str = "oracle"
    depth: int = 10
    budget: int | None = None
    strong_grade: int = 2
    #: oracle, patient: irrelevant | unsure | skip; negative_only: irrelevant | skip
    unjudged: str = "irrelevant"
    p_relevant: float = 0.8
    p_false_relevant: float = 0.1
    patience: int = 3
    p_mark: float = 0.5
    seed: int = 0


@dataclass
class EvalConf:
    measures: list[str] = field(default_factory=lambda: ["nDCG@10", "P@10", "R@20", "AP", "RR"])
    modes: list[str] = field(default_factory=lambda: ["full", "residual", "frozen"])
    primary_mode: str = "residual"
    primary_measure: str = "nDCG@10"


@dataclass
class ReplayConf:
    #: error | simulate | skip; None: simulate for collection-backed sets, error otherwise.
    on_miss: str | None = None


@dataclass
class ExperimentConf:
    name: str = "???"
    description: str = ""
    rounds: int = 1
    #: Results fetched by the initial search and by each ``expand``.
    depth: int = 20
    #: Use only the first N judged queries of the query set (None: all).
    queries: int | None = None
    #: Swept ranker parameters: ``{alpha: [..], beta: [..]}``, a config per combination.
    grid: dict[str, list[float]] = field(default_factory=dict)
    #: Engine configs side by side: each entry overrides ``ranker`` and ``refiner`` keys,
    #: e.g. ``[{ranker: {name: provider_order}}, {refiner: {name: term_rocchio}}]``.
    configs: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunConf:
    query_set: QuerySetConf = field(default_factory=QuerySetConf)
    ranker: RankerConf = field(default_factory=RankerConf)
    refiner: RefinerConf = field(default_factory=RefinerConf)
    analyzer: AnalyzerConf = field(default_factory=AnalyzerConf)
    eval: EvalConf = field(default_factory=EvalConf)
    experiment: ExperimentConf = field(default_factory=ExperimentConf)
    policies: dict[str, PolicyConf] = field(default_factory=dict)
    replay: ReplayConf = field(default_factory=ReplayConf)
    #: The provider ``record`` talks to: ``simulator`` (loopback) or ``brave_live``.
    provider: str = "simulator"
    #: Feedback rounds ``record`` captures (0: all rounds of the experiment).
    record_rounds: int = 1
    #: Record the provider's next pages for the equal-depth controls too.
    record_deep: bool = True
    runs_dir: str = "runs"
    seed: int = 0
    #: Worker processes (0: one per core).
    workers: int = 0
    #: Split the run by query into this many shards (experiment/shards.py), each run on its
    #: own (``shard=i``) and gathered into the one run they split.
    shards: int = 1
    #: Which shard this run replays: 0 .. shards - 1.
    shard: int = 0
    #: Render report.html at the end of ``run``.
    report: bool = True
    progress: bool = True


def register_configs() -> None:
    """Register the root schema; ``conf/config.yaml`` names it first in its defaults.

    Groups need no schema of their own: every group lands in a typed field of
    :class:`RunConf`, so their keys and types are checked there.
    """
    ConfigStore.instance().store(name="run_schema", node=RunConf)


CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def compose(overrides: list[str]) -> tuple[dict[str, Any], str]:
    """The resolved config for ``overrides``, as a plain dict and as YAML (for tests, scripts).

    The same composition ``python -m evidence_bench run`` does, without Hydra's app runner.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = hydra_compose(config_name="config", overrides=overrides)
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    return {str(k): v for k, v in plain.items()}, OmegaConf.to_yaml(cfg, resolve=True)
