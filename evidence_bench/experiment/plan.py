"""Planning a run: a resolved config validated into a :class:`RunPlan` of plain values.

Every name a config gives (ranker, refiner, user, measure, mode, grid key) is checked here,
before any worker starts, and a bad one is a one-line ConfigurationError naming the key.
Configs whose engine parts have the same effective parameters (Rocchio weights that differ
by a common factor, say) give the same results, so the plan runs the first of them and
records the others as its aliases: statistics count each distinct config once.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from evidence_bench._targets import TARGET, frozen
from evidence_bench.collections.queryset import load_query_set
from evidence_bench.errors import ConfigurationError
from evidence_bench.evaluation.measures import Measure, parse_measure
from evidence_bench.experiment.components import (
    RANKERS,
    EngineConfig,
    _choice,
    effective_key,
    engine_config,
    make_user,
)
from evidence_bench.experiment.config import (
    RankerConf,
    RefinerConf,
    SearchProviderConf,
    check_config,
)
from evidence_bench.experiment.targets import is_users, part_params, user_provider
from evidence_bench.protocol.stages import EVAL_MODES
from evidence_bench.web.cassettes import OnMiss
from evidence_bench.web.pages import check_failure_rate

__all__ = [
    "EVAL_MODES",
    "RunPlan",
    "UserVariant",
    "alias_groups",
    "deep_limit",
    "plan_run",
    "record_command",
    "user_variants",
]


@dataclass(frozen=True)
class UserVariant:
    """One user of a run over several seeds or judgment budgets: the ``policies`` entry it
    comes from, the seed its draws and its shuffled control use, and its depth."""

    user: str
    seed: int
    depth: int
    #: The name its shuffled control is dealt under: the label without its ``@s<seed>``, so
    #: ``noisy@s3`` gives what ``noisy`` gives in a ``seed=3`` run.
    episode_policy: str

    def as_dict(self) -> dict[str, Any]:
        budget = self.episode_policy != self.user
        return {"user": self.user, "seed": self.seed, "depth": self.depth, "budget": budget}


@dataclass(frozen=True)
class RunPlan:
    """Everything a run does, validated, in plain values."""

    experiment: str
    query_set: Mapping[str, Any]
    query_limit: int | None
    #: The distinct engine configs: what the run runs.
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
    #: The run split by query into ``shards`` (experiment/shards.py); this is shard ``shard``.
    shards: int = 1
    shard: int = 0
    #: Every engine config asked for, in order (``engines`` and their aliases); empty: engines.
    asked: tuple[EngineConfig, ...] = ()
    #: alias config_id -> config_id of the config in ``engines`` it shares every result with
    aliases: Mapping[str, str] = field(default_factory=dict)
    #: ``seeds`` (several seeds in one run); empty: the one ``seed``.
    seeds: tuple[int, ...] = ()
    #: user label -> its seed and depth, for a run over ``seeds`` or ``experiment.budgets``
    #: (every label of ``users``); empty otherwise: each user at ``seed`` and its own depth.
    variants: Mapping[str, UserVariant] = field(default_factory=dict)

    def user_seed(self, label: str) -> int:
        """The seed of ``label``'s draws and shuffled control."""
        variant = self.variants.get(label)
        return self.seed if variant is None else variant.seed

    def episode_policy(self, label: str) -> str:
        """The name ``label``'s shuffled control is dealt under."""
        variant = self.variants.get(label)
        return label if variant is None else variant.episode_policy

    #: ``pages.failure_rate``: the share of pages the simulator fails (evidence=page|both)
    page_failure_rate: float = 0.05
    #: ``search_provider``: the user's provider asked instead of the cassettes, as its
    #: ``_target_`` and parameters (None: the cassettes)
    search_provider: tuple[str, tuple[tuple[str, Any], ...]] | None = None

    @property
    def reads_pages(self) -> bool:
        """Whether some engine config reads the pages behind the results."""
        return any(engine.reads_pages for engine in self.engines)

    @property
    def uses_background(self) -> bool:
        """Whether some engine config takes its idf from the background sample."""
        return any(engine.uses_background for engine in self.engines)

    def __post_init__(self) -> None:
        if not self.asked:
            object.__setattr__(self, "asked", self.engines)


#: Overrides that do not change what an episode sends, left out of the record command.
_NOT_RECORDED = (
    "runs_dir=", "progress=", "report=", "workers=", "shard", "replay.", "hydra", "record_",
)  # fmt: skip


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
    check_config(cfg)
    experiment = cfg["experiment"]
    if experiment.get("name") in (None, "???"):
        raise ConfigurationError(
            "no experiment chosen: add +experiment=NAME (see conf/experiment/)"
        )
    measures = tuple(parse_measure(name) for name in cfg["eval"]["measures"])
    if not measures:
        raise ConfigurationError("eval.measures is empty")
    for measure in measures:
        if measure.incomplete:  # the episodes are scored from grades alone
            raise ConfigurationError(
                f"eval.measures: {measure} tells unjudged documents from judged ones, which "
                "an episode's scores do not; the report and check show Judged@10 beside "
                "each gain"
            )
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
    seeds = _int_list(cfg.get("seeds"), "seeds", low=-(2**63))
    budgets = _int_list(experiment.get("budgets"), "experiment.budgets", low=1, high=200)
    variants: dict[str, UserVariant] = {}
    if seeds or budgets:
        variants = user_variants(users, seeds, budgets, int(cfg.get("seed", 0)))
        users = {label: {**users[v.user], "depth": v.depth} for label, v in variants.items()}
    rounds = int(experiment["rounds"])
    depth = int(experiment["depth"])

    asked = _engines(cfg, experiment)
    engines, aliases = alias_groups(asked)
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
    shards, shard = int(cfg.get("shards", 1)), int(cfg.get("shard", 0))
    if not 0 <= shard < shards:
        raise ConfigurationError(
            f"shard={shard} must be between 0 and {shards - 1} (shards={shards})"
        )
    search_provider = _search_provider(cfg, engines)
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
        asked=asked,
        aliases=aliases,
        shards=shards,
        shard=shard,
        seeds=tuple(seeds),
        variants=variants,
        page_failure_rate=check_failure_rate((cfg.get("pages") or {}).get("failure_rate", 0.05)),
        search_provider=search_provider,
    )


def _search_provider(
    cfg: Mapping[str, Any], engines: Sequence[EngineConfig]
) -> tuple[str, tuple[tuple[str, Any], ...]] | None:
    """The user's search provider, built and checked now (None: the cassettes answer)."""
    conf = cfg.get("search_provider") or {}
    if not is_users(conf):
        return None
    if any(engine.uses_background for engine in engines):
        raise ConfigurationError(
            "search_provider: idf=background reads the cassettes' first pages; "
            "use idf=candidates with a search provider of your own"
        )
    target = str(conf[TARGET])
    params = frozen(part_params("search_provider", conf, SearchProviderConf, ()))
    collection = load_query_set(cfg["query_set"], limit=None).collection
    user_provider(target, params, collection)  # a bad target fails now, naming the key
    return target, params


def _int_list(values: Any, key: str, *, low: int, high: int | None = None) -> list[int]:
    """A list of distinct integers in [low, high], or a one-line error naming ``key``."""
    out: list[int] = []
    for value in values or []:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigurationError(f"{key}: {value!r} is not an integer")
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ConfigurationError(f"{key}: {value} must be {bound}")
        if value in out:
            raise ConfigurationError(f"{key}: {value} appears twice")
        out.append(value)
    return out


def _draws_at_random(name: str, conf: Mapping[str, Any]) -> bool:
    """Whether a user's marks depend on its seed: its policy takes one (noisy, random)."""
    return getattr(make_user(name, conf), "seed", None) is not None


def user_variants(
    users: Mapping[str, Mapping[str, Any]],
    seeds: Sequence[int],
    budgets: Sequence[int],
    seed: int,
) -> dict[str, UserVariant]:
    """Every user label of a run over ``seeds`` and judgment ``budgets``, in plan order.

    A user at its own depth runs once per seed when it draws at random (``noisy@s3``), once
    (at the first seed) when it does not (``oracle``: its marks cannot change with the
    seed). At each other budget it runs once, at the first seed (``oracle@d3``,
    ``noisy@d3@s0``). Without ``seeds`` every label runs at ``seed``.
    """
    variants: dict[str, UserVariant] = {}
    first = seeds[0] if seeds else seed
    for name, conf in users.items():
        if "@" in name:
            raise ConfigurationError(
                f"policies.{name}: '@' is reserved for the users a run over seeds or budgets "
                "derives (<user>@s<seed>, <user>@d<depth>); rename the policy"
            )
        own = int(conf.get("depth", 10))
        tagged = bool(seeds) and _draws_at_random(name, conf)
        for depth in [own, *(b for b in budgets if b != own)]:
            base = name if depth == own else f"{name}@d{depth}"
            for s in (seeds if depth == own else seeds[:1]) if tagged else [first]:
                label = f"{base}@s{s}" if tagged else base
                variants[label] = UserVariant(name, int(s), depth, base)
    return variants


def alias_groups(
    configs: Sequence[EngineConfig],
) -> tuple[tuple[EngineConfig, ...], dict[str, str]]:
    """The configs to run, and each alias's representative.

    Configs with the same :func:`~evidence_bench.experiment.components.effective_key` give
    the same rankings, refined queries and scores, so only the first of them (in plan order)
    runs; each later one maps to its config_id.
    """
    first: dict[Hashable, str] = {}
    aliases: dict[str, str] = {}
    for config in configs:
        representative = first.setdefault(effective_key(config), config.config_id)
        if representative != config.config_id:
            aliases[config.config_id] = representative
    return tuple(c for c in configs if c.config_id not in aliases), aliases


def deep_limit(plan: RunPlan) -> int:
    """How deep the equal-depth control fetches: as long as R expansions can make a list
    (each fetching ``depth``, or a deeper ``refiner.expand_depth``)."""
    expand = max([plan.depth, *(e.expand_depth or 0 for e in plan.engines)])
    return min(plan.depth + plan.rounds * expand, 200)


_SCHEMAS = {"ranker": RankerConf, "refiner": RefinerConf}


def _engines(cfg: Mapping[str, Any], experiment: Mapping[str, Any]) -> tuple[EngineConfig, ...]:
    """One engine config per ``experiment.configs`` entry (or the base config) per grid point."""
    schemas = {part: [f.name for f in fields(schema)] for part, schema in _SCHEMAS.items()}
    grid = {str(k): list(v) for k, v in (experiment.get("grid") or {}).items()}
    users_own = cfg["ranker"].get(TARGET) or any(
        (entry.get("ranker") or {}).get(TARGET) for entry in experiment.get("configs") or []
    )
    for key, values in grid.items():
        if key not in schemas["ranker"] and not users_own:  # a user's ranker has its own
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
                if key not in schemas[part] and not (
                    overrides.get(TARGET) or ({**cfg[part], **overrides}).get(TARGET)
                ):
                    valid = ", ".join(schemas[part])
                    raise ConfigurationError(f"{where}.{part}.{key}: unknown key ({valid})")
        ranker = {**cfg["ranker"], **entry.get("ranker", {})}
        refiner = {**cfg["refiner"], **entry.get("refiner", {})}
        takes = RANKERS[ranker["name"]].params if ranker["name"] in RANKERS else ()
        for key in grid if not ranker.get(TARGET) else ():  # a user's: engine_config checks
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
