"""Typed Hydra config schemas, registered in a ConfigStore: a typo in a key or a value of the
wrong type fails naming the key. ``+key=value`` adds a key even to a typed node, so
:func:`check_config` refuses keys no schema has.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from evidence_bench.errors import ConfigurationError
from evidence_bench.experiment.bounds import check_bounds
from evidence_bench.experiment.catalog import CONF_DIR, search_dirs

__all__ = [
    "CONF_DIR", "ROOT_CONFIG", "AnalyzerConf", "EvalConf", "ExperimentConf", "PagesConf",
    "PolicyConf", "QuerySetConf", "RankerConf", "RefinerConf", "ReplayConf", "RunConf",
    "SearchProviderConf", "TuneConf", "check_config", "compose", "config_dirs", "register_configs",
    "resolved",
]  # fmt: skip


@dataclass
class QuerySetConf:
    """A query set: a BEIR collection and the cassettes recorded for its queries."""

    #: The query set's name, used in run directories and reports.
    name: str = "???"
    #: The BEIR-layout collection directory (``corpus.jsonl``, ``queries.jsonl``, ``qrels.tsv``).
    path: str = "???"
    #: The directory of the query set's cassettes, one per query, and its ``manifest.json``.
    cassettes: str = "???"
    #: ``collection``: judgments and a simulator come from ``path``; ``live``: recorded from
    #: live Brave, replay misses cannot be simulated.
    source: str = "collection"
    #: Use only the first N judged queries (None: all judged queries).
    limit: int | None = None
    #: A qrels file (BEIR or TREC) of judgments added to the collection's, e.g. what
    #: ``assess`` wrote; its grade replaces the collection's for the same query and document.
    qrels: str | None = None
    #: A loader of your own instead of ``path``: ``module.function`` (or a class), called
    #: with the keys of this node it takes, returning documents, queries and qrels
    #: (:func:`evidence_bench.collections.queryset.loaded_collection`).
    _target_: str | None = None


@dataclass
class RankerConf:
    """Every ranker's settings; a ranker reads only the keys it takes (components.RANKERS).

    With ``_target_`` the ranker is the user's and this node takes keys of its own too:
    ``ranker: {_target_: my_ranker.MyRanker, k1: 1.2}`` (on the command line,
    ``ranker._target_=my_ranker.MyRanker ranker.k1=1.2``).
    """

    #: The ranker: tfidf_rocchio, provider_order, livefetch or vector_rocchio.
    name: str = "tfidf_rocchio"
    #: A ranker of your own instead of ``name``: ``module.Class`` (or a function), called
    #: with the keys of this node it takes; the working directory is on ``sys.path``.
    _target_: str | None = None
    #: Rocchio weights (tfidf_rocchio, vector_rocchio, and livefetch's relevance part)
    alpha: float = 1.0
    #: Rocchio's weight of the centroid of the results marked relevant (MORE, RELEVANT).
    beta: float = 0.75
    #: Rocchio's weight of the centroid of the results marked irrelevant (LESS, IRRELEVANT).
    gamma: float = 0.15
    #: lift results the user marked relevant to the front, order kept (any ranker)
    boost_relevant: bool = False
    #: livefetch: S = w_r R + w_f F + w_t T - w_dup D; w_r weighs the relevance R
    w_r: float = 0.55
    #: livefetch: the weight of freshness F
    w_f: float = 0.25
    #: livefetch: the weight of the domain trust prior T
    w_t: float = 0.20
    #: livefetch: the weight of the redundancy penalty D
    w_dup: float = 0.35
    #: livefetch: days after which a result's freshness halves
    half_life_days: float = 7.0
    #: the fixed date freshness is measured against (never the wall clock)
    as_of: str = "2026-01-01"
    #: livefetch: the freshness of a result without a date
    neutral_freshness: float = 0.5
    #: livefetch: the trust of a domain no list names
    default_trust: float = 0.5
    #: livefetch: registrable domains trusted fully
    allow_domains: list[str] = field(default_factory=list)
    #: livefetch: registrable domains not trusted at all
    deny_domains: list[str] = field(default_factory=list)
    #: vector_rocchio: lsa (no extra) or dense (pip install 'evidence_bench[dense]')
    embedder: str = "lsa"
    #: vector_rocchio with embedder=lsa: the number of LSA dimensions
    dimensions: int = 16
    #: What the ranker reads of each result: snippet (title + snippet), page (title + the
    #: page's extracted text, clipped to 12,000 characters; the snippet where the page
    #: failed) or both (title, snippet and page). page and both replay the query set's page
    #: cassette (``record`` writes it).
    evidence: str = "snippet"
    #: tfidf_rocchio: where idf comes from: candidates (the results it ranks) or background
    #: (the pages of every query's first results plus the candidates; engine/background.py).
    idf: str = "candidates"


@dataclass
class SearchProviderConf:
    """A search provider of your own: every search of a run (the first, the deeper list, each
    expansion) asks it instead of the cassettes and the simulator."""

    #: ``module.Class`` (or a function), called with the keys of this node it takes, and
    #: with ``collection`` (the query set's) if it takes one; null: the cassettes.
    _target_: str | None = None


@dataclass
class AnalyzerConf:
    """The analyzer the ranker and the refiner share (they must see the same terms)."""

    #: A Snowball algorithm (english, porter, ...) or null for no stemming. English is the
    #: default because it raised residual nDCG@10 on both Cranfield and CACM.
    stemmer: str | None = "english"
    #: Drop English stop words before ranking and refining.
    stop_words: bool = True


@dataclass
class RefinerConf:
    """The refiner that builds the query ``expand`` sends; it reads only the keys it takes.

    With ``_target_`` the refiner is the user's and this node takes keys of its own too.
    """

    #: The refiner: lexical or term_rocchio.
    name: str = "lexical"
    #: A refiner of your own instead of ``name``: ``module.Class`` (or a function), called
    #: with the keys of this node it takes.
    _target_: str | None = None
    #: The most new terms the refined query adds.
    max_terms: int = 4
    #: term_rocchio: w(t) = f_q(t) + beta mean f_rel(t) - gamma mean f_irr(t)
    beta: float = 0.75
    #: term_rocchio: the weight of the mean frequency in irrelevant results
    gamma: float = 0.15
    #: What the refiner reads of each result: snippet (title, snippet, extra snippets),
    #: page (title + the page's extracted text, clipped to 12,000 characters) or both.
    evidence: str = "snippet"
    #: lexical: where idf comes from: candidates (the results it reads) or background (the
    #: pages of every query's first results plus the candidates; engine/background.py).
    idf: str = "candidates"
    #: How many results the refined query fetches (null: experiment.depth, one page).
    expand_depth: int | None = None


@dataclass
class PolicyConf:
    """A simulated user; a key its kind does not take must keep its default (else the run
    fails naming the key)."""

    #: The policy: oracle, noisy, positive_only, negative_only, patient, random, or a click
    #: model: pbm, cascade, dbn (users/clicks.py).
    kind: str = "oracle"
    #: A simulated user of your own instead of ``kind``: ``module.Class`` (or a function),
    #: called with the keys of this node it takes (``seed``: the run's plus this one).
    _target_: str | None = None
    #: New results the user examines per round, from the top of the list shown.
    depth: int = 10
    #: The most marks the user gives per round (None: no limit); past it results are seen.
    budget: int | None = None
    #: The lowest grade an oracle marks MORE rather than RELEVANT.
    strong_grade: int = 2
    #: A result the qrels do not judge (TREC: non-relevant). oracle, patient:
    #: irrelevant | unsure | skip; negative_only: irrelevant | skip.
    unjudged: str = "irrelevant"
    #: noisy: the probability of marking a relevant result RELEVANT.
    p_relevant: float = 0.8
    #: noisy: the probability of marking a non-relevant result RELEVANT.
    p_false_relevant: float = 0.1
    #: patient: consecutive non-relevant results after which the user stops.
    patience: int = 3
    #: random: the probability of marking a result RELEVANT.
    p_mark: float = 0.5
    #: The seed of a stochastic user's draws.
    seed: int = 0
    #: pbm, cascade, dbn: P(click | examined) per relevance level 0, 1, ... (attractiveness;
    #: levels from the qrels' grades on the collection's scale, see users/clicks.py).
    p_click: list[float] = field(default_factory=lambda: [0.05, 0.3, 0.5, 0.7, 0.95])
    #: dbn: P(satisfied, stop | clicked) per relevance level 0, 1, ... (DBN's sigma).
    p_stop: list[float] = field(default_factory=lambda: [0.2, 0.3, 0.5, 0.7, 0.9])
    #: dbn: P(going on to the next result | not satisfied) (DBN's gamma; 1: simplified DBN).
    p_continue: float = 1.0
    #: pbm: P(examined at rank r) = (1/r)^eta (Joachims et al. 2017; 0: every rank examined).
    eta: float = 1.0
    #: pbm, cascade, dbn: a result shown above a click and not clicked: less (LESS, "click >
    #: skip above", Joachims et al. 2005) | none (no label).
    skip_above: str = "less"
    #: pbm, cascade, dbn: the grade read as the tables' last level (None: the highest grade
    #: in the collection's qrels, so binary qrels take the tables' two ends).
    top_grade: int | None = None
    #: A simulated user of your own (``_target_``): keyword arguments of its own, beside the
    #: keys above it takes (a policy's keys are typed, so a key of its own goes here).
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class EvalConf:
    """What is measured, and which measure and mode the report and the gate lead with."""

    #: Measures in ir_measures syntax, computed with trec_eval's semantics.
    measures: list[str] = field(default_factory=lambda: ["nDCG@10", "P@10", "R@20", "AP", "RR"])
    #: Evaluation modes: full, residual, frozen.
    modes: list[str] = field(default_factory=lambda: ["full", "residual", "frozen"])
    #: The mode of the report's headline tables; one of ``modes``.
    primary_mode: str = "residual"
    #: The measure of the report's headline tables; one of ``measures``.
    primary_measure: str = "nDCG@10"


@dataclass
class ReplayConf:
    """What replay does with a request no cassette holds."""

    #: error | simulate | skip; None: simulate for collection-backed sets, error otherwise.
    on_miss: str | None = None


@dataclass
class PagesConf:
    """The pages behind the results, for ``evidence=page|both``: how the simulator serves
    them and how ``record`` fetches them (``web/page_cassettes.py``)."""

    #: The share of a collection's pages that fail, in equal parts 404, timeout and
    #: non-HTML, chosen by a hash of the document id; recorded in the page cassette, and a
    #: run asking another share than its cassette's stops.
    failure_rate: float = 0.05
    #: Seconds ``record`` gives a page, connect, headers and body together, before
    #: recording a timeout.
    timeout_s: float = 5.0
    #: ``record`` from live Brave: also fetch pages on loopback, private and link-local
    #: addresses (recorded as ``blocked_address`` otherwise); the simulator's own pages on
    #: 127.0.0.1 are fetched either way.
    allow_private: bool = False


@dataclass
class TuneConf:
    """Cross-validated tuning of ranker weights (``+experiment=rocchio_tune``,
    :mod:`evidence_bench.experiment.tune`)."""

    #: k of k-fold cross-validation over the queries
    folds: int = 5
    #: Optuna TPE trials per fold, of which the first ``startup_trials`` are random
    trials: int = 20
    startup_trials: int = 8
    #: ranker parameter -> [low, high], searched on a grid of ``step`` (null: continuous)
    space: dict[str, list[float]] = field(
        default_factory=lambda: {"beta": [0.0, 8.0], "gamma": [0.0, 4.0]}
    )
    step: float | None = 0.05
    #: the feedback stage whose gain over its no-feedback control is maximized
    stage: str = "expand"
    #: the user (a key of ``policies``) whose episodes are scored
    policy: str = "oracle"


@dataclass
class ExperimentConf:
    """One experiment: its query subset, rounds, and the engine configs it compares."""

    #: The experiment's name: the directory under ``runs_dir``.
    name: str = "???"
    #: One line shown in the report.
    description: str = ""
    #: Feedback rounds per episode.
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
    #: Set for a tuning experiment: search ``tune.space`` by k-fold cross-validation.
    tune: TuneConf | None = None
    #: Judgment budgets: each user also runs examining this many results per round (its
    #: ``depth``), as ``<user>@d<N>``, at the first seed, for the report's budget curve,
    #: e.g. ``[1, 3, 5, 10, 20]`` (empty: each user at its own depth only).
    budgets: list[int] = field(default_factory=list)


@dataclass
class RunConf:
    """The root config: every group in a typed field, and the run's own settings."""

    query_set: QuerySetConf = field(default_factory=QuerySetConf)
    ranker: RankerConf = field(default_factory=RankerConf)
    refiner: RefinerConf = field(default_factory=RefinerConf)
    analyzer: AnalyzerConf = field(default_factory=AnalyzerConf)
    eval: EvalConf = field(default_factory=EvalConf)
    experiment: ExperimentConf = field(default_factory=ExperimentConf)
    #: The simulated users, by the label reports show; each entry from ``conf/policy/``.
    policies: dict[str, PolicyConf] = field(default_factory=dict)
    replay: ReplayConf = field(default_factory=ReplayConf)
    pages: PagesConf = field(default_factory=PagesConf)
    #: The provider ``record`` talks to: ``simulator`` (loopback) or ``brave_live``.
    provider: str = "simulator"
    #: A search provider of your own, asked by ``run`` instead of the cassettes.
    search_provider: SearchProviderConf = field(default_factory=SearchProviderConf)
    #: Feedback rounds ``record`` captures (0: all rounds of the experiment).
    record_rounds: int = 1
    #: Record the provider's next pages for the equal-depth controls too.
    record_deep: bool = True
    #: Record the searches too (false: answer them from the cassettes, or the simulator
    #: where they lack one, and record only the page cassette).
    record_searches: bool = True
    #: Where runs are written: ``<runs_dir>/<experiment>/<run id>/``; a relative path is the
    #: working directory's; made if missing.
    runs_dir: str = "runs"
    #: The run's seed, recorded in the manifest.
    seed: int = 0
    #: Several seeds in one run: each user that draws at random runs once per seed, as
    #: ``<user>@s<seed>``, its marks and shuffled control those a ``seed=<seed>`` run gives
    #: it; a user that draws nothing runs once, at the first. ``seed`` still seeds the
    #: report's randomization tests. Empty: the one ``seed``.
    seeds: list[int] = field(default_factory=list)
    #: Worker processes (0: one per core).
    workers: int = 0
    #: Split the run by query into this many shards (experiment/shards.py), each run on its
    #: own (``shard=i``) and gathered into the one run they split.
    shards: int = 1
    #: Which shard this run replays: 0 .. shards - 1.
    shard: int = 0
    #: Render report.html at the end of ``run``.
    report: bool = True
    #: Show a progress bar while episodes run.
    progress: bool = True


def register_configs() -> None:
    """Register the root schema (every group lands in a typed field of :class:`RunConf`)
    and the shipped root config, as :data:`ROOT_CONFIG`, with the shipped ``conf/`` on its
    search path (Hydra looks for its primary config on the one it starts with)."""
    _store_schema()
    _store_root(None)


@functools.cache
def _store_schema() -> None:
    """Register the root schema, once a process: it is made from :class:`RunConf` alone, and
    Hydra hands out a copy of what it stores at each composition."""
    schema = OmegaConf.structured(RunConf)
    for part in _OPEN:  # a user's part takes keys of its own (their types are its own too)
        OmegaConf.set_struct(schema[part], False)
    ConfigStore.instance().store(name="run_schema", node=schema)


def _store_root(user: Path | None) -> None:
    """Register the root config: the shipped ``conf/config.yaml``, and over it the user's
    ``config.yaml`` in ``user`` where there is one (a ``defaults`` list in it is refused: it
    cannot be merged into the shipped one)."""
    root = yaml.safe_load((CONF_DIR / "config.yaml").read_text(encoding="utf-8"))
    root["hydra"]["searchpath"] = [f"file://{CONF_DIR}"]
    mine = None if user is None else user / "config.yaml"
    if mine is not None and mine.is_file():
        try:
            own = yaml.safe_load(mine.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigurationError(f"{mine}: cannot be read ({detail})") from exc
        if not isinstance(own, dict):
            raise ConfigurationError(f"{mine}: not a mapping of config keys")
        if "defaults" in own:
            raise ConfigurationError(
                f"{mine}: a defaults list is not read in your root config; choose groups in "
                "an experiment (conf/experiment/NAME.yaml) or by override (query_set=NAME)"
            )
        if unknown := _unknown_key(own, RunConf, ""):
            raise ConfigurationError(f"{mine}: {unknown}")
        root = OmegaConf.to_container(OmegaConf.merge(root, own))
    ConfigStore.instance().store(name=ROOT_CONFIG, node=root)


#: The nodes that take keys no schema declares when they name a ``_target_``; the schema's
#: own keys keep their types, and :func:`check_config` refuses another key without one.
_OPEN = ("ranker", "refiner", "query_set", "search_provider")

#: The root config's name in the ConfigStore: every composition starts from it.
ROOT_CONFIG = "evidence_bench"


def config_dirs(config_dir: str | Path | None = None) -> tuple[Path, ...]:
    """Where configs are looked up (:func:`~evidence_bench.experiment.catalog.search_dirs`),
    the first that has one winning; the user's own ``config.yaml`` there applies over the
    shipped root (:func:`_store_root`)."""
    dirs = search_dirs(config_dir)
    _store_root(dirs[0] if len(dirs) > 1 else None)
    return dirs


#: An experiment's name is one directory under ``runs_dir``: a single, plain path component.
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def check_config(cfg: Mapping[str, Any]) -> None:
    """Refuse what the schemas let through: a key added with ``+`` that no schema has, a
    knob that multiplies work outside its bound (:mod:`~evidence_bench.experiment.bounds`),
    an ``experiment.name`` that is not one safe path component."""
    if unknown := _unknown_key(cfg, RunConf, ""):
        raise ConfigurationError(unknown)
    check_bounds(cfg)
    name = str((cfg.get("experiment") or {}).get("name"))
    if name != "???" and (not _SAFE_NAME.fullmatch(name) or ".." in name):
        raise ConfigurationError(
            f"experiment.name={name!r} must be one plain directory name (letters, digits, "
            "'_', '-', '.'; no '/' or '..'): runs are written to <runs_dir>/<experiment.name>"
        )


def _unknown_key(cfg: Mapping[str, Any], schema: type, prefix: str) -> str:
    """The first key of ``cfg`` (depth first) that ``schema`` does not declare, as a message."""
    hints = typing.get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    for key, value in cfg.items():
        if key == "hydra" and not prefix:
            continue
        if key not in names:
            return f"{prefix}{key}: unknown config key (valid: {', '.join(names)})"
        hint = hints[key]
        nested = f"{prefix}{key}."
        if isinstance(value, Mapping) and value.get("_target_") and not prefix and key in _OPEN:
            continue  # the user's part: its own keys (experiment/targets.py checks them)
        if dataclasses.is_dataclass(hint) and isinstance(value, Mapping):  # noqa: SIM102
            if found := _unknown_key(value, typing.cast(type, hint), nested):
                return found
        args = typing.get_args(hint)
        if typing.get_origin(hint) is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):
            for name, item in (value or {}).items():
                if isinstance(item, Mapping):  # noqa: SIM102
                    if found := _unknown_key(item, typing.cast(type, args[1]), f"{nested}{name}."):
                        return found
    return ""


def compose(
    overrides: list[str], config_dir: str | Path | None = None
) -> tuple[dict[str, Any], str]:
    """The resolved config for ``overrides``, as a plain dict and as YAML (for tests, scripts).

    The same composition ``python -m evidence_bench run`` does, without Hydra's app runner;
    ``config_dir`` as for :func:`config_dirs`.
    """
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(config_dirs(config_dir)[0]), version_base=None):
        return resolved(hydra_compose(config_name=ROOT_CONFIG, overrides=overrides))


def resolved(cfg: Any) -> tuple[dict[str, Any], str]:
    """A composed config, resolved, as a plain dict and as YAML."""
    plain = OmegaConf.to_container(cfg, resolve=True)
    assert isinstance(plain, dict)
    return {str(k): v for k, v in plain.items()}, OmegaConf.to_yaml(cfg, resolve=True)
