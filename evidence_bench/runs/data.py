"""Load a run directory (notes/RUNDIR.md) into DataFrames, and merge a multirun's runs.

Only ``manifest.json``, ``configs.csv`` and the scores (``scores.parquet``; ``per_query.csv``
in a directory written by hand, or exported) are required; the report degrades (no episode
details, no grades) when the others are missing. A run just computed passes its tables
(:class:`~evidence_bench.runs.store.RunTables`) instead of reading them back.
Episodes and documents are read lazily, for the few configurations the report details,
because a full sweep holds far more than the report shows. Every id is read as a string: a
query id ``001`` must not become ``1``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from evidence_bench.errors import DataError
from evidence_bench.evaluation.incomplete import judged_cells
from evidence_bench.protocol.stages import STAGES
from evidence_bench.runs.checksums import check_tables
from evidence_bench.runs.store import (
    PER_QUERY_COLUMNS,
    SUMMARY_KEYS,
    RunTables,
    episode_records,
    read_table,
    read_tables,
    trec_qrels,
)
from evidence_bench.seeding import derived_seed

__all__ = [
    "FIXED_KEYS",
    "JUDGED_AT",
    "PER_QUERY_COLUMNS",
    "Cell",
    "RunData",
    "Settings",
    "Source",
    "gather_multirun",
    "judged_by_cell",
    "load_documents",
    "load_episodes",
    "load_run",
    "merge_runs",
    "multirun_jobs",
    "numbered_jsonl",
    "read_csv",
    "read_jsonl",
    "reads_csv",
    "run_judged",
]

#: a fixed cell's key: its summary row's
FIXED_KEYS = tuple(SUMMARY_KEYS)
_PER_QUERY_DTYPES = {
    "config_id": "category", "policy": "category", "query_id": "category", "round": "int16",
    "stage": "category", "eval_mode": "category", "measure": "category", "value": "float64",
}  # fmt: skip
#: Read as strings first: pandas infers a category column's type (``001`` would become 1).
_PER_QUERY_READ = {c: "str" if t == "category" else t for c, t in _PER_QUERY_DTYPES.items()}
#: configs.csv columns that describe a configuration rather than set one of its parameters.
_DESCRIPTIVE = frozenset({"config_id", "label", "ranker", "refiner", "role", "alias_of"})


@dataclass(frozen=True, slots=True)
class Settings:
    """What the run measured and which measure and mode the report leads with."""

    experiment: str
    query_set: str
    measures: tuple[str, ...]
    modes: tuple[str, ...]
    primary_mode: str
    primary_measure: str
    rounds: int
    #: The run's ``seed``: the randomization tests' signs derive from it (a multirun's
    #: jobs with different seeds: one seed derived from all of theirs).
    seed: int = 0


@dataclass(frozen=True, slots=True)
class Source:
    """One run directory, and the prefixes its ids get when it is merged into a multirun."""

    path: Path
    config_prefix: str = ""
    id_prefix: str = ""


@dataclass(frozen=True)
class RunData:
    """A run directory's tables; ``path`` is where ``report.html`` goes."""

    @property
    def aliases(self) -> dict[str, str]:
        """alias config_id -> the config_id whose results it shares (configs.csv alias_of)."""
        shared = self.configs[self.configs["alias_of"] != ""]
        return dict(zip(shared["config_id"], shared["alias_of"], strict=True))

    path: Path
    settings: Settings
    manifest: Mapping[str, Any]
    configs: pd.DataFrame
    per_query: pd.DataFrame
    queries: pd.DataFrame
    qrels: pd.DataFrame
    sources: tuple[Source, ...]
    swept: tuple[str, ...]
    policies: tuple[str, ...]
    stages: tuple[str, ...]
    #: Cells that cannot change (``summary.csv``'s ``fixed``: frozen evaluation's pinned
    #: prefix): config_id, policy, round, stage, eval_mode, measure. Empty when none or
    #: when the run does not say.
    fixed: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=list(FIXED_KEYS)))
    #: The run's tables when it was just computed (episodes come from them, not its files).
    tables: RunTables | None = None
    #: config_id -> the query set it was scored on, in a multirun over several query sets
    #: (their queries are disjoint: configs of two are never compared); empty otherwise.
    strata: Mapping[str, str] = field(default_factory=dict)


def read_csv(path: Path, required: Sequence[str], **kwargs: Any) -> pd.DataFrame:
    """``pd.read_csv(path, **kwargs)``; a missing or unreadable file, or one without the
    ``required`` columns, is a :class:`DataError` naming it."""
    if not path.is_file():
        raise DataError(f"{path}: file not found (is this a run directory?)")
    try:
        frame: pd.DataFrame = pd.read_csv(path, keep_default_na=True, **kwargs)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        raise DataError(f"{path}: cannot be read as CSV: {exc}") from exc
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataError(f"{path}: missing column(s) {', '.join(missing)}")
    return frame


def _optional_csv(path: Path, columns: Sequence[str], dtype: Mapping[str, Any]) -> pd.DataFrame:
    if not path.is_file():
        return pd.DataFrame({c: pd.Series(dtype=dtype.get(c, "str")) for c in columns})
    return read_csv(path, columns, dtype=dict(dtype))


def _lookup(tree: Mapping[str, Any], dotted: str, default: Any) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def _settings(config: Mapping[str, Any], manifest: Mapping[str, Any], pq: pd.DataFrame) -> Settings:
    measures = _ordered(pd.unique(pq["measure"]).astype(str), _lookup(config, "eval.measures", []))
    modes = _ordered(pd.unique(pq["eval_mode"]).astype(str), _lookup(config, "eval.modes", []))
    mode = str(_lookup(config, "eval.primary_mode", "residual"))
    measure = str(_lookup(config, "eval.primary_measure", "nDCG@10"))
    rounds = int(pq["round"].max()) if len(pq) else 0
    return Settings(
        experiment=str(_lookup(config, "experiment.name", manifest.get("experiment", "?"))),
        query_set=str(_lookup(config, "query_set.name", manifest.get("query_set", "?"))),
        measures=measures,
        modes=modes,
        primary_mode=mode if mode in modes else (modes[0] if modes else mode),
        primary_measure=measure if measure in measures else (measures[0] if measures else measure),
        rounds=int(_lookup(config, "experiment.rounds", rounds)),
        seed=int(_lookup(config, "seed", 0) or 0),
    )


def _fixed(run_dir: Path, summary: pd.DataFrame | None = None) -> pd.DataFrame:
    """The cells the summary (``summary.parquet``, or ``summary.csv``) marks ``fixed``; none
    when it has no such column."""
    empty = pd.DataFrame(columns=list(FIXED_KEYS))
    path = run_dir / "summary.csv"
    if summary is None and (run_dir / "summary.parquet").is_file():
        summary = read_table(run_dir, "summary")
    if summary is None:
        if not path.is_file():
            return empty
        dtype = {c: str for c in FIXED_KEYS if c != "round"}
        wanted = {*FIXED_KEYS, "fixed"}
        summary = read_csv(path, FIXED_KEYS, dtype=dtype, usecols=lambda c: c in wanted)
    if "fixed" not in summary:
        return empty
    flags = summary["fixed"].map(lambda v: str(v).strip().lower() in {"true", "1"})
    cells = summary.loc[flags, list(FIXED_KEYS)].reset_index(drop=True)
    cells["round"] = cells["round"].astype("int64")
    return cells


def _swept(configs: pd.DataFrame, manifest: Mapping[str, Any]) -> tuple[str, ...]:
    """Parameters that vary across the feedback configurations, manifest's order first."""
    params = [c for c in configs.columns if c not in _DESCRIPTIVE]
    listed = [p for p in _lookup(manifest, "sweep.params", []) if p in params]
    feedback = configs[configs["role"] != "baseline"] if "role" in configs else configs
    varying = [p for p in params if feedback[p].dropna().nunique() > 1]
    return tuple([p for p in listed if p in varying] + [p for p in varying if p not in listed])


def _ordered(values: Iterable[str], preferred: Sequence[str]) -> tuple[str, ...]:
    seen = list(dict.fromkeys(values))
    return tuple([v for v in preferred if v in seen] + [v for v in seen if v not in preferred])


def reads_csv(run_dir: Path) -> bool:
    """Whether every reader takes ``run_dir``'s scores and summary from ``per_query.csv``
    and ``summary.csv`` (a run directory written by hand, or from before Parquet): it has
    neither ``scores.parquet`` nor ``summary.parquet``, and one of the CSVs. The CSVs an
    export writes beside the Parquet tables are not read."""
    if (run_dir / "scores.parquet").is_file() or (run_dir / "summary.parquet").is_file():
        return False
    return (run_dir / "per_query.csv").exists() or (run_dir / "summary.csv").exists()


def _scores(run_dir: Path) -> pd.DataFrame:
    """The per-query values: ``scores.parquet``, or ``per_query.csv`` (:func:`reads_csv`)."""
    if not reads_csv(run_dir):
        return read_table(run_dir, "scores")
    return read_csv(run_dir / "per_query.csv", PER_QUERY_COLUMNS, dtype=_PER_QUERY_READ)


def load_run(run_dir: Path, *, tables: RunTables | None = None) -> RunData:
    """Read a run directory; raises :class:`DataError` naming the file that is missing or bad.

    ``tables``: the run's results just computed, used instead of its files. The path is
    resolved, so ``runs/<experiment>/latest`` reports its real run id.
    """
    run_dir = Path(run_dir).resolve()
    manifest_path = run_dir / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
    except FileNotFoundError:
        raise DataError(f"{manifest_path}: file not found (is this a run directory?)") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{manifest_path}: not valid JSON: {exc}") from exc
    if tables is None:  # (tables just computed are not read from the files)
        check_tables(run_dir, manifest)
    config_path = run_dir / "config.yaml"
    config: Any = {}
    if config_path.is_file():
        try:
            config = yaml.safe_load(config_path.read_text("utf-8")) or {}
        except yaml.YAMLError as exc:
            raise DataError(f"{config_path}: not valid YAML: {exc}") from exc
    configs = read_csv(
        run_dir / "configs.csv", ["config_id", "label"], dtype=dict.fromkeys(_DESCRIPTIVE, str)
    )
    if "role" not in configs:
        configs["role"] = "feedback"
    configs["role"] = configs["role"].fillna("feedback")
    # alias_of: the config whose results an alias shares; empty for a config that ran (and
    # for every config of a run from before aliases).
    configs["alias_of"] = configs["alias_of"].fillna("") if "alias_of" in configs else ""
    dangling = set(configs["alias_of"]) - set(configs["config_id"]) - {""}
    if dangling:
        raise DataError(
            f"{run_dir / 'configs.csv'}: alias_of names config_id(s) "
            f"{', '.join(sorted(dangling))} that are not in configs.csv"
        )
    per_query = tables.scores if tables is not None else _scores(run_dir)
    scores = "per_query.csv" if reads_csv(run_dir) else "scores.parquet"
    # every reader pairs and groups by these keys: a row without one is refused here, once
    blank = [c for c in PER_QUERY_COLUMNS[:-1] if per_query[c].isna().any()]
    if blank:
        raise DataError(f"{run_dir / scores}: a row has no {blank[0]}")
    per_query = per_query.astype(_PER_QUERY_DTYPES)
    unknown = set(per_query["config_id"].cat.categories) - set(configs["config_id"])
    if unknown:
        raise DataError(
            f"{run_dir / scores}: config_id(s) {', '.join(sorted(unknown))} are not in configs.csv"
        )
    queries = _optional_csv(run_dir / "queries.csv", ["query_id", "query"], {"query_id": str})
    qrels = _optional_csv(
        run_dir / "qrels.csv",
        ["query_id", "doc_id", "relevance"],
        {"query_id": str, "doc_id": str, "relevance": "int64"},
    )
    return RunData(
        path=run_dir,
        settings=_settings(config, manifest, per_query),
        manifest=manifest,
        configs=configs,
        per_query=per_query,
        queries=queries,
        qrels=qrels,
        sources=(Source(run_dir),),
        swept=_swept(configs, manifest),
        policies=tuple(str(p) for p in pd.unique(per_query["policy"])),
        stages=_ordered((str(s) for s in pd.unique(per_query["stage"])), STAGES),
        fixed=_fixed(run_dir, tables.summary if tables is not None else None),
        tables=tables,
    )


def _prefixed(frame: pd.DataFrame, columns: Sequence[str], prefix: str) -> pd.DataFrame:
    if not prefix:
        return frame
    out = frame.copy()
    for column in columns:
        out[column] = prefix + out[column].astype(str)
    return out


def _merged_manifest(runs: Sequence[tuple[str, RunData]], id_prefixed: bool) -> dict[str, Any]:
    def joined(key: str) -> str:
        values = [str(r.manifest.get(key, "?")) for _, r in runs]
        return ", ".join(dict.fromkeys(values))

    def total(*path: str) -> int:
        return sum(int(_lookup(r.manifest, ".".join(path), 0) or 0) for _, r in runs)

    excluded: dict[str, int] = {}
    params: list[str] = []
    seeds: list[Any] = []
    for prefix, run in runs:
        for key, count in (run.manifest.get("excluded") or {}).items():
            excluded[prefix + key] = int(count)
        params += [p for p in _lookup(run.manifest, "sweep.params", []) if p not in params]
        given = run.manifest.get("seeds", [])
        # a run's seeds: a mapping (seed, users, derivations), or a list in older runs
        seeds += [s for s in ([given] if isinstance(given, Mapping) else given) if s not in seeds]
    queries = [int(r.manifest.get("queries", len(r.queries)) or 0) for _, r in runs]
    dated = [r.manifest["missing_dates"] for _, r in runs if "missing_dates" in r.manifest]
    # One job run from a dirty working tree makes the whole multirun unreproducible from git.
    dirty = [r.manifest.get("git_dirty") for _, r in runs]
    # user label -> user, seed, depth (runs over seeds or budgets); labels are not prefixed
    variants: dict[str, Any] = {}
    for _, run in runs:
        variants.update(run.manifest.get("variants") or {})
    return {
        **({"variants": variants} if variants else {}),
        **({"missing_dates": sum(int(d or 0) for d in dated)} if dated else {}),
        **({"git_dirty": True} if any(d is True for d in dirty) else {}),
        "package_version": joined("package_version"),
        "git_commit": joined("git_commit"),
        "experiment": joined("experiment"),
        "query_set": joined("query_set"),
        "cassette_manifest_sha256": joined("cassette_manifest_sha256"),
        "collection_checksum": joined("collection_checksum"),
        "seeds": seeds[0] if len(seeds) == 1 and isinstance(seeds[0], Mapping) else seeds,
        **_merged_labels(runs),
        "wall_time_s": sum(float(r.manifest.get("wall_time_s", 0) or 0) for _, r in runs),
        "episodes": total("episodes"),
        "queries": sum(queries) if id_prefixed else max(queries, default=0),
        "created": min(str(r.manifest.get("created", "")) for _, r in runs),
        "replay": {k: total("replay", k) for k in ("replayed", "simulated", "skipped")},
        "excluded": excluded,
        "sweep": {"params": params},
        "configs": {
            "asked": sum(len(r.configs) for _, r in runs),
            "distinct": sum(int((r.configs["alias_of"] == "").sum()) for _, r in runs),
            "aliases": {
                prefix + alias: prefix + target
                for prefix, r in runs
                for alias, target in r.aliases.items()
            },
        },
        "jobs": len(runs),
    }


def _merged_labels(runs: Sequence[tuple[str, RunData]]) -> dict[str, Any]:
    """The runs' ``labels``: counts under prefixed config ids, each user's expected kinds
    (their union), and each run's missing kinds naming its job."""
    given = [(prefix, r.manifest["labels"]) for prefix, r in runs if "labels" in r.manifest]
    if not given:
        return {}
    expected: dict[str, list[str]] = {}
    counts: list[dict[str, Any]] = []
    missing: list[dict[str, Any]] = []
    for prefix, labels in given:
        for policy, kinds in (labels.get("expected") or {}).items():
            mine = expected.setdefault(policy, [])
            mine += [k for k in kinds if k not in mine]
        counts += [
            {**c, "config_id": prefix + str(c.get("config_id"))} for c in labels.get("counts", [])
        ]
        missing += [{**m, "job": prefix} for m in labels.get("missing", [])]
    return {"labels": {"expected": expected, "counts": counts, "missing": missing}}


def merge_runs(runs: Sequence[tuple[str, RunData]], path: Path) -> RunData:
    """One RunData from several, each config_id prefixed by its run's prefix (``"j0:"``).

    Where the runs used different query sets, query and document ids are prefixed too, so a
    query ``1`` of one collection is never paired with, or graded by, a query ``1`` of another.
    Where the query sets differ, every label starts with its query set (``cranfield ·
    tfidf_rocchio …``), so each row says which collection it is; labels that still repeat
    across runs get the prefix, so every row of the report is told apart.
    """
    if not runs:
        raise DataError(f"{path}: no runs to merge")
    id_prefixed = len({r.settings.query_set for _, r in runs}) > 1

    def named(run: RunData, label: str) -> str:
        return f"{run.settings.query_set} · {label}" if id_prefixed else label

    labels = pd.Series([named(r, label) for _, r in runs for label in r.configs["label"]])
    repeated = set(labels[labels.duplicated()])
    configs, per_query, queries, qrels, sources, fixed = [], [], [], [], [], []
    for prefix, run in runs:
        ids = prefix if id_prefixed else ""
        cfg = _prefixed(run.configs, ["config_id"], prefix)
        cfg["alias_of"] = [prefix + a if a else "" for a in run.configs["alias_of"]]
        cfg["label"] = [
            prefix + label if label in repeated else label
            for label in (named(run, label) for label in cfg["label"])
        ]
        configs.append(cfg)
        per_query.append(
            _prefixed(run.per_query, ["config_id", *(["query_id"] if ids else [])], prefix)
        )
        queries.append(_prefixed(run.queries, ["query_id"], ids))
        qrels.append(_prefixed(run.qrels, ["query_id", "doc_id"], ids))
        fixed.append(_prefixed(run.fixed, ["config_id"], prefix))
        sources += [replace(s, config_prefix=prefix, id_prefix=ids) for s in run.sources]
    merged_pq = pd.concat(per_query, ignore_index=True)
    merged_pq = merged_pq.astype(_PER_QUERY_DTYPES)
    merged_configs = pd.concat(configs, ignore_index=True)
    manifest = _merged_manifest(runs, id_prefixed)
    first = runs[0][1].settings
    settings = replace(
        first,
        experiment=", ".join(dict.fromkeys(r.settings.experiment for _, r in runs)),
        query_set=", ".join(dict.fromkeys(r.settings.query_set for _, r in runs)),
        measures=_ordered((m for _, r in runs for m in r.settings.measures), first.measures),
        modes=_ordered((m for _, r in runs for m in r.settings.modes), first.modes),
        rounds=max(r.settings.rounds for _, r in runs),
        seed=_merged_seed([r.settings.seed for _, r in runs]),
    )
    return RunData(
        path=Path(path),
        settings=settings,
        manifest=manifest,
        configs=merged_configs,
        per_query=merged_pq,
        queries=pd.concat(queries, ignore_index=True).drop_duplicates("query_id"),
        qrels=pd.concat(qrels, ignore_index=True).drop_duplicates(["query_id", "doc_id"]),
        sources=tuple(sources),
        swept=_swept(merged_configs, manifest),
        policies=_ordered((p for _, r in runs for p in r.policies), runs[0][1].policies),
        stages=_ordered((s for _, r in runs for s in r.stages), STAGES),
        fixed=pd.concat(fixed, ignore_index=True),
        strata={
            prefix + str(c): r.settings.query_set
            for prefix, r in runs
            for c in r.configs["config_id"]
        }
        if id_prefixed
        else {},
    )


def multirun_jobs(directory: Path) -> list[tuple[str, Path]]:
    """(job number, run directory) of each job of the Hydra multirun ``directory`` that
    holds a run (``<job>/run/``, or ``<job>/`` itself), by number; a job without
    ``manifest.json`` failed and is left out."""
    jobs = sorted(
        (p for p in directory.iterdir() if p.is_dir() and p.name.isdigit()),
        key=lambda p: int(p.name),
    )
    runs = [[c for c in (job / "run", job) if (c / "manifest.json").is_file()] for job in jobs]
    return [(job.name, found[0]) for job, found in zip(jobs, runs, strict=True) if found]


def gather_multirun(directory: Path) -> RunData:
    """The runs of a Hydra multirun (``<dir>/<job>/run/``) as one, config ids ``j<job>:``."""
    directory = Path(directory)
    if not directory.is_dir():
        raise DataError(f"{directory}: not a directory")
    runs = [(f"j{job}:", load_run(path)) for job, path in multirun_jobs(directory)]
    if not runs:
        raise DataError(
            f"{directory}: no run directories found (expected <job number>/run/manifest.json)"
        )
    return merge_runs(runs, directory)


def _merged_seed(seeds: Sequence[int]) -> int:
    """The jobs' seed when they share one; else one derived from all, so changing any
    job's seed resamples the multirun's randomization tests."""
    distinct = list(dict.fromkeys(seeds))
    return distinct[0] if len(distinct) == 1 else derived_seed("multirun", *distinct)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """A JSON-lines file record by record: :func:`numbered_jsonl` without the numbers."""
    return (record for _number, record in numbered_jsonl(path))


def numbered_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """A JSON-lines file's records, each with its line number, blank lines skipped; a
    missing or unreadable file, or a line that is not a JSON object, is a
    :class:`DataError` naming the file (and the line)."""
    try:
        lines = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except OSError as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from exc
    with lines:
        try:
            for number, line in enumerate(lines, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{number}: invalid JSON ({exc.msg})") from exc
                if not isinstance(record, dict):
                    raise DataError(f"{path}:{number}: expected a JSON object")
                yield number, record
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: cannot be read ({exc})") from exc


def load_episodes(
    data: RunData, config_id: str, queries: Collection[str] | None = None
) -> dict[tuple[str, str], dict[str, Any]]:
    """The episodes of one configuration, keyed by (policy, query_id), ids as in ``data``;
    ``queries``: only those of these query ids (decoding an episode is what costs)."""
    episodes: dict[tuple[str, str], dict[str, Any]] = {}
    for source in data.sources:
        if source.config_prefix and not config_id.startswith(source.config_prefix):
            continue
        local = config_id[len(source.config_prefix) :]
        prefix = source.id_prefix
        mine = (
            None if queries is None else {q[len(prefix) :] for q in queries if q.startswith(prefix)}
        )
        for record in _episodes(data, source, local, mine):
            query_id = source.id_prefix + str(record.get("query_id"))
            rounds = record.get("rounds") or []
            for round_ in rounds:
                for key in ("before", "after_rerank", "after_expand"):
                    if round_.get(key) is not None:
                        round_[key] = [source.id_prefix + str(d) for d in round_[key]]
                for mark in round_.get("marks") or []:
                    mark["doc_id"] = source.id_prefix + str(mark.get("doc_id"))
                for row in round_.get("breakdown") or []:
                    row["doc_id"] = source.id_prefix + str(row.get("doc_id"))
            record.update(config_id=config_id, query_id=query_id, rounds=rounds)
            episodes[(str(record.get("policy")), query_id)] = record
    return episodes


def _episodes(
    data: RunData, source: Source, config_id: str, queries: Collection[str] | None
) -> Iterable[dict[str, Any]]:
    """One configuration's episode records of one source (of ``queries`` only, unless None):
    from the tables the run just computed, ``episodes.parquet``, or ``episodes.jsonl``
    (written by hand, or exported)."""
    tables = data.tables if source.path == data.path else None
    if tables is None and (source.path / "episodes.parquet").is_file():
        tables = read_tables(source.path, ("episodes", "rankings"))
    if tables is None:
        if not (source.path / "episodes.jsonl").is_file():
            return
        for record in read_jsonl(source.path / "episodes.jsonl"):
            if str(record.get("config_id")) == config_id and (
                queries is None or str(record.get("query_id")) in queries
            ):
                yield record
        return
    episodes = tables.episodes
    rows = episodes["config_id"] == config_id
    if queries is not None:
        rows &= episodes["query_id"].isin(queries)
    yield from episode_records(tables, episodes[rows])


#: The cutoff of the ``Judged@k`` shown beside each gain and checked by ``check
#: --min-judged``: the depth the primary measures read.
JUDGED_AT = 10
#: A Judged@k cell: (config_id, policy, round, stage).
Cell = tuple[str, str, int, str]


def run_judged(run_dir: Path, tables: RunTables | None = None) -> dict[Cell, float]:
    """(config_id, policy, round, stage) -> the mean ``Judged@10`` of the run's rankings
    (``runs.parquet``'s full lists, against its qrels): how much of what a gain was measured
    on is judged (an unjudged result counts as irrelevant,
    :mod:`evidence_bench.evaluation.incomplete`). ``tables``: the run's tables just
    computed, else they are read from ``run_dir``; a run without them is a DataError."""
    if tables is None:
        tables = read_tables(run_dir, only=("runs", "rankings", "trec_qrels"))
    return judged_cells(tables.runs, tables.rankings, trec_qrels(tables), JUDGED_AT)


def judged_by_cell(data: RunData) -> dict[Cell, float]:
    """:func:`run_judged` of every run merged into ``data``, its config ids prefixed as the
    report's; a run without its TREC runs (written before them, or exported CSVs) gives none."""
    cells: dict[Cell, float] = {}
    for source in data.sources:
        try:
            found = run_judged(source.path, data.tables if len(data.sources) == 1 else None)
        except DataError:
            continue
        for (cid, policy, round_, stage), value in found.items():
            cells[source.config_prefix + cid, policy, round_, stage] = value
    return cells


def load_documents(data: RunData, doc_ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """Title, URL and snippet of the given documents (untrusted web text, for escaping)."""
    wanted = set(doc_ids)
    found: dict[str, dict[str, str]] = {}
    for source in data.sources:
        if not (source.path / "documents.jsonl").is_file():
            continue
        for record in read_jsonl(source.path / "documents.jsonl"):
            doc_id = source.id_prefix + str(record.get("doc_id"))
            if doc_id in wanted and doc_id not in found:
                found[doc_id] = {k: str(record.get(k) or "") for k in ("url", "title", "snippet")}
    return found
