"""Gather a run's shards (experiment/shards.py) into the one run they split.

The gathered run is written by :func:`perform_run` from the shards' outputs read back from
their files, so every file is the unsharded run's; its manifest differs only in when and
how long, and in ``gathered``. The shards must be the N slices of one run, each once, of
one config (but :data:`EXECUTION_KEYS`), code, cassettes and collection: else a
one-line :class:`DataError` naming the shard.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evidence_bench.collections.queryset import load_query_set
from evidence_bench.errors import DataError
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.run import RunOutcome, RunReport, perform_run
from evidence_bench.experiment.rundir import read_queries
from evidence_bench.experiment.runner import QueryOutput
from evidence_bench.experiment.shards import Gathered, shard_slice
from evidence_bench.runs.checksums import check_tables
from evidence_bench.runs.data import multirun_jobs, read_jsonl
from evidence_bench.runs.store import (
    PER_QUERY_COLUMNS,
    RunTables,
    episode_records,
    feedback_frame,
    read_tables,
    trec_runs,
)

__all__ = ["EXECUTION_KEYS", "find_shards", "gather_shards"]

#: Config keys that change no number: shards may differ in them (one machine's runs_dir is
#: not another's), and the gathered run takes the first shard's.
EXECUTION_KEYS = ("runs_dir", "workers", "progress", "report")
_SHARD_KEYS = ("shards", "shard")
#: What the numbers depend on besides the config: every shard must have the same.
_PROVENANCE = ("package_version", "git_commit", "cassette_manifest_sha256", "collection_checksum")


@dataclass(frozen=True)
class _Shard:
    path: Path
    index: int
    count: int
    manifest: Mapping[str, Any]
    config: Mapping[str, Any]

    @property
    def name(self) -> str:
        return f"shard {self.index} ({self.path})"


def find_shards(paths: Iterable[Path]) -> list[Path]:
    """The run directories ``paths`` name: each a run, or a multirun directory whose jobs
    are runs (:func:`~evidence_bench.runs.data.multirun_jobs`)."""
    found: list[Path] = []
    for path in map(Path, paths):
        if (path / "manifest.json").is_file():
            found.append(path)
        elif path.is_dir():
            found += [run for _job, run in multirun_jobs(path)]
        else:
            raise DataError(f"{path}: not a directory")
    return found


def _read_shard(path: Path) -> _Shard:
    manifest_path, config_path = path / "manifest.json", path / "config.yaml"
    try:
        manifest = json.loads(manifest_path.read_text("utf-8"))
        config = yaml.safe_load(config_path.read_text("utf-8"))
    except FileNotFoundError as exc:
        raise DataError(f"{exc.filename}: file not found (is this a run directory?)") from None
    except (json.JSONDecodeError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: manifest.json or config.yaml cannot be read: {exc}") from exc
    entry = manifest.get("shard") if isinstance(manifest, dict) else None
    if not isinstance(entry, Mapping) or not isinstance(config, dict):
        raise DataError(
            f"{path}: not a shard (its manifest.json has no 'shard' entry; "
            "a shard is run with shards=N shard=i)"
        )
    check_tables(path, manifest)  # a table swapped or edited since the shard wrote it
    return _Shard(path, int(entry["index"]), int(entry["count"]), manifest, config)


def _difference(a: Any, b: Any, where: str = "") -> str | None:
    """The first dotted key at which two configs differ, with both values."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in list(a) + [k for k in b if k not in a]:
            found = _difference(a.get(key), b.get(key), f"{where}{key}.")
            if found:
                return found
        return None
    return None if a == b else f"{where.rstrip('.')} ({b!r}, not {a!r})"


def _comparable(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in (*_SHARD_KEYS, *EXECUTION_KEYS)}


def _checked(shards: Sequence[_Shard], where: str) -> list[_Shard]:
    """The shards in index order, each checked against the first: one run's, each once."""
    first = min(shards, key=lambda s: s.index)
    for shard in shards:
        if shard.count != first.count:
            raise DataError(
                f"{shard.name} is one of {shard.count} shards, {first.name} one of {first.count}"
            )
        key = _difference(_comparable(first.config), _comparable(shard.config))
        if key:
            raise DataError(f"{shard.name}: its config differs from shard {first.index}'s at {key}")
        for entry in _PROVENANCE:
            mine, theirs = shard.manifest.get(entry), first.manifest.get(entry)
            if mine != theirs:
                raise DataError(
                    f"{shard.name}: {entry} {mine!r} differs from shard {first.index}'s {theirs!r}"
                )
    by_index: dict[int, _Shard] = {}
    for shard in shards:
        if shard.index in by_index:
            raise DataError(
                f"shard {shard.index} of {first.count} appears twice: "
                f"{by_index[shard.index].path} and {shard.path}"
            )
        by_index[shard.index] = shard
    missing = [str(i) for i in range(first.count) if i not in by_index]
    if missing:
        found = ", ".join(str(i) for i in sorted(by_index))
        raise DataError(
            f"shard{'s' if len(missing) > 1 else ''} {', '.join(missing)} of {first.count} "
            f"missing in {where} (found {found}); run "
            f"{'them' if len(missing) > 1 else 'it'} with shards={first.count} shard=N"
        )
    return [by_index[i] for i in range(first.count)]


def _outputs(shard: _Shard, query_ids: Sequence[str]) -> list[QueryOutput]:
    """The shard's :class:`QueryOutput`\\ s, read back, in query order; the totals the run
    only sums (requests, skipped expands, ...) and the documents given to its first."""
    documents = (
        Evidence(d["title"], d["url"], d["snippet"])
        for d in read_jsonl(shard.path / "documents.jsonl")
    )
    outputs = _query_outputs(shard, read_tables(shard.path), query_ids, documents)
    first = outputs[0]
    replay = shard.manifest.get("replay") or {}
    first.requests = Counter(
        {k: int(replay.get(k, 0)) for k in ("replayed", "simulated", "skipped")}
    )
    first.skipped_expands = int(replay.get("skipped_expand_stages", 0))
    first.no_usable_feedback = int(shard.manifest.get("no_usable_feedback", 0))
    first.missing_dates = int(shard.manifest.get("missing_dates", 0))
    return outputs


def _query_outputs(
    shard: _Shard, tables: RunTables, query_ids: Sequence[str], documents: Iterable[Evidence] = ()
) -> list[QueryOutput]:
    """The tables as the :class:`QueryOutput`\\ s they were built from, in ``query_ids``
    order, ``documents`` to the first; a row of another query is a :class:`DataError`."""
    rows: dict[str, dict[str, Any]] = {
        qid: {"scores": [], "feedback": [], "episodes": [], "rankings": {}} for qid in query_ids
    }

    def out(query_id: str, table: str) -> dict[str, Any]:
        if query_id not in rows:
            raise DataError(
                f"{shard.path / table}.parquet: query {query_id!r} is not one of "
                f"{shard.name}'s queries"
            )
        return rows[query_id]

    scores = tables.scores
    for row in zip(*(scores[c].tolist() for c in PER_QUERY_COLUMNS), strict=True):
        cid, policy, qid, round_, stage, mode, measure, value = row
        out(str(qid), "scores")["scores"].append(
            (str(cid), str(policy), str(qid), int(round_), str(stage), str(mode), str(measure),
             float(value))
        )  # fmt: skip
    for row in feedback_frame(tables):
        out(row[2], "feedback")["feedback"].append(row)
    for episode in episode_records(tables):
        out(episode["query_id"], "episodes")["episodes"].append(episode)
    for (cid, policy, round_, stage), run in trec_runs(tables).items():
        for qid, ranking in run.items():
            out(qid, "runs")["rankings"][(cid, policy, round_, stage)] = ranking
    outs = {qid: QueryOutput.from_rows(qid, **mine) for qid, mine in rows.items()}
    if query_ids:
        first = outs[query_ids[0]]
        for evidence in documents:
            first.documents.setdefault(evidence.key, evidence)
    return [outs[qid] for qid in query_ids]


def gather_shards(
    paths: Sequence[Path],
    *,
    run_dir: Path | None = None,
    overrides: Sequence[str] | None = None,
    report: RunReport | None = None,
) -> RunOutcome:
    """Write the run that ``paths`` (shard runs, or multirun directories of them) split,
    where the unsharded run would go or into ``run_dir``, as :func:`perform_run` does.
    ``overrides``: the command line's, else the first shard's (without ``shard(s)=``)."""
    from omegaconf import OmegaConf

    where = ", ".join(str(p) for p in paths)
    found = find_shards(paths)
    if not found:
        raise DataError(f"{where}: no run directory found (a shard's manifest.json, or <job>/run/)")
    shards = _checked([_read_shard(p) for p in found], where)
    first = shards[0]
    cfg = {**first.config, "shards": 1, "shard": 0}
    config_yaml = OmegaConf.to_yaml(OmegaConf.create(cfg))
    plan = plan_run(cfg)
    query_ids = list(load_query_set(plan.query_set, limit=plan.query_limit).queries)
    outputs: list[QueryOutput] = []
    for shard in shards:
        expected = shard_slice(query_ids, first.count, shard.index)
        held = list(read_queries(shard.path / "queries.csv"))
        if held != expected:
            raise DataError(
                f"{shard.name}: holds {len(held)} queries, not the {len(expected)} of slice "
                f"{shard.index} of {first.count} of this run's {len(query_ids)} "
                f"(first {expected[0]!r} .. last {expected[-1]!r})"
            )
        outputs += _outputs(shard, expected)
    given = first.manifest.get("overrides") if overrides is None else overrides
    if given is not None:
        given = [o for o in given if not o.lstrip("+~").startswith(("shards=", "shard="))]
    dirty = [s.manifest.get("git_dirty") for s in shards]
    provenance = {
        "package_version": first.manifest.get("package_version"),
        "git_commit": first.manifest.get("git_commit"),
        "git_dirty": True if True in dirty else first.manifest.get("git_dirty"),
        "gathered": {
            "shards": [
                {
                    "index": s.index,
                    "path": str(s.path.resolve()),
                    "run_id": s.manifest.get("run_id"),
                    "queries": len(shard_slice(query_ids, first.count, s.index)),
                    "wall_time_s": s.manifest.get("wall_time_s"),
                }
                for s in shards
            ]
        },
    }
    return perform_run(
        cfg,
        config_yaml,
        run_dir=run_dir,
        overrides=given,
        gathered=Gathered(outputs, provenance),
        report=report,
    )
