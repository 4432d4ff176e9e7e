"""``run``: plan, execute, and write one complete run directory."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from evidence_bench._forked import both
from evidence_bench._lazy import module
from evidence_bench._resources import distribution_version
from evidence_bench._trim import release_memory
from evidence_bench.collections.queryset import (
    QuerySet,
    load_query_set,
    resolve_path,
    unjudged_notice,
)
from evidence_bench.errors import DataError
from evidence_bench.evaluation.comparisons import RANDOMIZATION_SEED
from evidence_bench.evaluation.statistics import first_met, group_codes
from evidence_bench.experiment.components import PARAM_DEFAULTS
from evidence_bench.experiment.plan import RunPlan, plan_run
from evidence_bench.experiment.progress import progress_bar
from evidence_bench.experiment.rundir import (
    RunDirectory,
    frozen_flags,
    new_run_id,
    score_summary,
    summarize_scores,
    with_fixed,
    write_inputs,
    write_json,
    write_rows,
)
from evidence_bench.experiment.runner import QueryOutput, execute, plan_users
from evidence_bench.experiment.shards import Gathered, shard_entry, shard_query_set
from evidence_bench.runs.checksums import MANIFEST_KEY as TABLES_KEY
from evidence_bench.runs.checksums import table_checksums
from evidence_bench.runs.store import (
    RunTables,
    TableBuilder,
    TablesWriter,
    as_stored,
    write_tables,
)
from evidence_bench.seeding import derivation
from evidence_bench.users.labels import label_summary, label_warnings
from evidence_bench.users.policies import UserPolicy
from evidence_bench.web.cassette_manifest import find_manifest
from evidence_bench.web.cassettes import file_sha256

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from evidence_bench.web.cassettes import OnMiss
else:
    pd = module("pandas")
    pa = module("pyarrow")


#: The fewest scores (rows of per_query) for which a run with workers computes its tail's
#: independent parts in two processes.
TAIL_FORK_ROWS = 10_000_000
#: frozen_flags' answer: each frozen row's position, and whether its measure is fixed
Flags = tuple[npt.NDArray[np.intp], npt.NDArray[np.bool_]]

__all__ = ["RunOutcome", "RunReport", "perform_run", "run_directory", "runs_root"]


class RunReport(Protocol):
    """Renders a new run's report into its staging directory ``run_dir`` from the tables
    just computed, and returns the summary the terminal prints. The command line passes the
    report's (:func:`evidence_bench.report.fresh.new_run_report`): the experiment writes runs
    and never imports the report.

    ``analyzed``: called once the analysis is computed, before the page is rendered (the run
    starts writing its Parquet files then); ``inputs``: called before the report hashes the
    run's files (it waits for those files); ``processes``: how many processes the analysis
    may use at once (the run's workers; its numbers do not depend on it)."""

    def __call__(
        self,
        run_dir: Path,
        tables: RunTables,
        *,
        analyzed: Callable[[], object] | None = None,
        inputs: Callable[[], object] | None = None,
        processes: int = 1,
    ) -> str: ...


class RunOutcome:
    """Where a run went and the figures a caller prints."""

    def __init__(
        self, path: Path, summary: pd.DataFrame, manifest: Mapping[str, Any], terminal: str
    ) -> None:
        self.path = path
        self.summary = summary
        self.manifest = manifest
        #: the short summary table printed at the end of a run ("" without a report)
        self.terminal = terminal

    def announce(self) -> str:
        """What the command line prints at the end: the summary, the run's and report's paths."""
        report = self.path / "report.html"
        return "".join(
            [
                f"{self.terminal}\n" if self.terminal else "",
                f"run: {self.path}\n",
                f"report: {report}\n" if report.exists() else "",
            ]
        )


#: The checkout the package runs from, if it does (else it is installed, and the commit
#: recorded is that of the working directory's repository: the user's project)
_CHECKOUT = Path(__file__).resolve().parents[2]


def _git_cwd() -> Path:
    return _CHECKOUT if (_CHECKOUT / ".git").exists() else Path.cwd()


def _git(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=_git_cwd(), capture_output=True, text=True, timeout=5, check=False
        )
    except OSError:
        return None


def _git_state() -> dict[str, Any]:
    """The manifest's ``git_commit`` ("unknown" outside a git checkout) and ``git_dirty``:
    whether the working tree had uncommitted changes (None outside a git checkout)."""
    head = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    return {
        "git_commit": (head.stdout.strip() if head else "") or "unknown",
        "git_dirty": bool(status.stdout.strip()) if status and status.returncode == 0 else None,
    }


def _provenance(
    git: Mapping[str, Any],
    overrides: Sequence[str] | None,
    experiment: str,
    query_set: QuerySet,
    queries: int,
) -> dict[str, Any]:
    """The manifest's entries on where a run's numbers come from: the code (``git``:
    :func:`_git_state`), the overrides, the query set, its cassettes and collection, and
    how many of its queries ran."""
    manifest_file = find_manifest(query_set.cassettes)
    return {
        "package_version": distribution_version(),
        **git,
        "overrides": list(overrides) if overrides is not None else None,
        "experiment": experiment,
        "query_set": query_set.name,
        "cassettes": str(query_set.cassettes),
        "cassette_manifest_sha256": file_sha256(manifest_file) if manifest_file else None,
        "collection_checksum": query_set.collection.checksum,
        "queries": queries,
        "queries_truncated": query_set.truncated,
        "queries_without_relevant": query_set.unjudged,
    }


def perform_run(
    cfg: Mapping[str, Any],
    config_yaml: str,
    *,
    run_dir: Path | None = None,
    overrides: Sequence[str] | None = None,
    gathered: Gathered | None = None,
    report: RunReport | None = None,
) -> RunOutcome:
    """Run the experiment ``cfg`` describes and write its run directory.

    ``run_dir``: write into exactly this (new) directory instead of
    ``<runs_dir>/<experiment>/<run id>`` (Hydra multirun jobs). The run's directory is
    reserved before anything is computed, so an unwritable ``runs_dir`` fails at once.
    ``gathered``: the outputs read back from the run's shards, written instead of replaying
    (experiment/gather.py). ``report``: renders the run's report (when ``cfg.report`` is
    true and the run is whole, not a shard); without it the run writes no report.
    """
    started = time.perf_counter()
    plan = plan_run(cfg, overrides)
    # a shard is part of a run: ``latest`` keeps pointing at a whole one
    target = run_directory(cfg, config_yaml, plan.experiment, run_dir, link_latest=plan.shards == 1)
    target.reserve()
    try:
        return _perform(cfg, config_yaml, plan, target, overrides, started, gathered, report)
    finally:
        target.release()  # a run that failed leaves nothing; a finished one is kept


def _arrow_pool() -> None:
    """Arrow's buffers (pandas' strings, the Parquet writer's pages) from jemalloc when this
    pyarrow has it: it hands freed memory back within a second, where the default mimalloc
    keeps it. ``ARROW_DEFAULT_MEMORY_POOL``, when set, is left to choose."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc
        pa.set_memory_pool(pa.jemalloc_memory_pool())


def run_directory(
    cfg: Mapping[str, Any],
    config_yaml: str,
    experiment: str,
    run_dir: Path | None,
    *,
    link_latest: bool = True,
) -> RunDirectory:
    """Where a run is written: exactly ``run_dir`` (a Hydra multirun job), else a new run id
    under ``<runs_dir>/<experiment>``, which moves ``latest`` when ``link_latest``."""
    if run_dir is not None:
        return RunDirectory(run_dir.parent, run_dir.name, link_latest=False)
    root = runs_root(cfg)
    return RunDirectory(root / experiment, new_run_id(config_yaml), link_latest=link_latest)


def runs_root(cfg: Mapping[str, Any]) -> Path:
    """``runs_dir``: an absolute path as given, a relative one against the working directory
    (where Hydra puts a multirun's sweep directory too); created with the run if missing."""
    return Path.cwd() / Path(str(cfg.get("runs_dir", "runs"))).expanduser()


def _perform(
    cfg: Mapping[str, Any],
    config_yaml: str,
    plan: RunPlan,
    target: RunDirectory,
    overrides: Sequence[str] | None,
    started: float,
    gathered: Gathered | None,
    report: RunReport | None,
) -> RunOutcome:
    users = plan_users(plan)
    # before the episodes: a subprocess forked from the tail's parent (hundreds of MB
    # resident) counts it twice in the process tree's memory while it runs
    git = _git_state()
    whole = load_query_set(plan.query_set, limit=plan.query_limit)
    query_set = shard_query_set(whole, plan)
    query_ids = list(query_set.queries)
    # the processes the episodes and the analysis may use (0: one per core)
    workers = int(cfg.get("workers", 0)) or os.cpu_count() or 1
    outputs: Iterable[QueryOutput] = (
        gathered.outputs if gathered is not None else execute(plan, query_ids, workers=workers)
    )
    outputs = progress_bar(
        outputs, total=len(query_ids), desc=plan.experiment, unit="query",
        enabled=bool(cfg.get("progress", True)),
    )  # fmt: skip

    builder = TableBuilder()
    documents: dict[str, Any] = {}
    requests: Counter[str] = Counter()
    episodes = skipped = no_feedback = missing_dates = replayed_initials = judged_hits = 0
    episodes_started = time.perf_counter()
    for out in outputs:
        builder.add(out.rows)
        episodes += len(out.episodes)
        for key, evidence in out.documents.items():
            documents.setdefault(key, evidence)
        requests.update(out.requests)
        skipped += out.skipped_expands
        no_feedback += out.no_usable_feedback
        missing_dates += out.missing_dates
        replayed_initials += out.replayed_initial
        judged_hits += out.judged_hits
    # the part of the wall the workers share: the episodes, from the state execute built
    # for them before (counted in start-up, as the rest: start-up and the tail are serial)
    episodes_time = time.perf_counter() - episodes_started
    unjudged_hits = ""
    if replayed_initials and not judged_hits:
        unjudged_hits = _no_judged_hits(query_set, documents, replayed_initials)
        if query_set.source != "live":
            raise DataError(unjudged_hits)

    _arrow_pool()  # after the episodes: the workers are forked without pyarrow
    feedback = builder.feedback()
    tables = builder.tables(query_set.qrels)
    del builder  # what it collected is in the frames now: its memory is theirs to reuse

    # the tail's independent parts in two processes only for a run whose tables are large
    # enough to pay for the fork and the second process' memory (benchmarks/bench_run.py:
    # the sweep's tail gains nothing, the ten-times workload's does)
    tail = workers if len(tables.scores) >= TAIL_FORK_ROWS else 1

    def stored() -> tuple[pd.DataFrame, dict[str, int], dict[str, Any]]:
        """The scores as stored (the exact values are gone; the keys, all _excluded counts,
        stay), what they exclude and the labels' summary."""
        kept = as_stored(tables.scores, exact=plan.shards > 1)
        return (
            kept,
            _excluded(kept, len(query_ids)),
            label_summary(
                feedback[["config_id", "policy", "round", "label"]],
                users,  # counted by code
            ),
        )

    if tail > 1:
        # the summary's statistics in a forked process while this one stores the scores
        # and flags the frozen cells
        def parent() -> tuple[tuple[pd.DataFrame, dict[str, int], dict[str, Any]], Flags | None]:
            qrels = query_set.qrels
            return stored(), frozen_flags(tables.scores, feedback, qrels) if qrels else None

        ((per_query, excluded, labels), flags), statistics = both(
            parent, lambda: score_summary(tables.scores), processes=tail
        )
        summary = with_fixed(statistics, flags)
    else:
        # in turn, the summary first: its peak passes before the stored copy of the scores
        # is made beside the exact one
        summary = summarize_scores(tables.scores, feedback, query_set.qrels)
        per_query, excluded, labels = stored()
    tables = replace(tables, scores=per_query, summary=summary)
    release_memory()
    manifest: dict[str, Any] = {
        **_provenance(git, overrides, plan.experiment, query_set, len(query_ids)),
        # live results no judgment names: every score is 0 (absent when some were judged)
        **({"unjudged_results": unjudged_hits} if unjudged_hits else {}),
        # judgments added to the collection's (query_set.qrels: what `assess` wrote)
        **(
            {"added_qrels_sha256": file_sha256(resolve_path(str(added), "query_set.qrels"))}
            if (added := plan.query_set.get("qrels"))
            else {}
        ),
        "seeds": {
            **_seeds(plan.seed, users),
            **({"seeds": list(plan.seeds)} if plan.seeds else {}),
        },
        # a run over several seeds or budgets: each user label's user, seed and depth
        **(
            {"variants": {label: v.as_dict() for label, v in plan.variants.items()}}
            if plan.variants
            else {}
        ),
        "episodes": episodes,
        "replay": _replay(requests, skipped, plan.on_miss),
        "excluded": excluded,
        # episode rounds whose marks the ranker could not use (all unsure): their rerank
        # and expand are the no-feedback order
        "no_usable_feedback": no_feedback,
        "labels": labels,
        "sweep": {"params": list(plan.swept)},
        # Configs asked for and distinct configs run; an alias's results are its target's.
        "configs": {
            "asked": len(plan.asked),
            "distinct": len(plan.engines),
            "aliases": dict(plan.aliases),
        },
        **(
            {"missing_dates": missing_dates}
            if any(e.ranker == "livefetch" for e in plan.engines)
            else {}
        ),
        **(
            {"shard": shard_entry(plan, len(whole.queries), len(query_ids))}
            if plan.shards > 1
            else {}
        ),
        **(gathered.manifest if gathered is not None else {}),
    }

    # the Parquet files in a thread (Arrow writes them without the GIL) while the rest
    # of the tail goes on here; waited for before the directory is moved
    with target as tmp, TablesWriter(tmp, tables, write_tables) as parquet:
        (tmp / "config.yaml").write_text(config_yaml)
        reporting = report is not None and plan.shards == 1 and cfg.get("report", True)
        if not reporting:
            parquet.start()  # beside the other files (no report's peak to wait past)
        params = list(dict.fromkeys(k for e in plan.asked for k in e.params()))
        write_rows(
            tmp / "configs.csv",
            # alias_of: the config whose rows an alias shares (empty for one that ran)
            ["config_id", "label", "ranker", "refiner", "role", "alias_of", *params],
            (
                [
                    e.config_id,
                    e.label,
                    e.ranker,
                    e.refiner,
                    e.role,
                    plan.aliases.get(e.config_id, ""),
                ]
                + [e.params().get(k, PARAM_DEFAULTS.get(k, "")) for k in params]
                for e in plan.asked
            ),
        )
        write_inputs(tmp, documents, query_set)
        manifest["run_id"] = target.final.name
        manifest["created"] = datetime.now(UTC).isoformat(timespec="seconds")
        manifest["wall_time_s"] = round(time.perf_counter() - started, 3)
        manifest["episodes_time_s"] = round(episodes_time, 3)  # (gathered: reading back)
        write_json(tmp / "manifest.json", manifest)

        def tables_written() -> None:
            """Wait for the Parquet files, then keep their checksums in the manifest."""
            parquet.join()
            manifest[TABLES_KEY] = table_checksums(tmp)
            write_json(tmp / "manifest.json", manifest)

        terminal = ""
        if reporting:
            assert report is not None

            def analyzed() -> None:
                # what the analysis freed handed back before the writer's Arrow and the
                # page allocate theirs on top (release_memory)
                release_memory()
                # the Parquet files written while the page is (after the analysis: its
                # randomization tests and validity panel are the tail's peaks of
                # memory), in place before the stored analysis' key hashes them
                parquet.start()

            # the frames just computed, not read back
            terminal = report(tmp, tables, analyzed=analyzed, inputs=tables_written, processes=tail)
        elif plan.shards > 1:
            pass  # a shard's numbers are partial: the run gathered from its shards reports
        else:  # no summary table, but a policy that gave no labels of a kind is still said
            terminal = "".join(f"{line}\n" for line in label_warnings(manifest["labels"]))
        if TABLES_KEY not in manifest:  # (a report kept them when it hashed the files)
            tables_written()
    if unjudged_hits:  # results from the web: none judged until someone judges them
        terminal += f"warning: {unjudged_hits}\n"
    if notice := unjudged_notice(whole):
        terminal += f"{notice}\n"
    if requests["simulated"] and not requests["replayed"]:  # (a mistyped cassette path?)
        terminal += (
            f"warning: no search was answered from the cassettes in {query_set.cassettes} "
            f"(none recorded there?): all {requests['simulated']} were simulated\n"
        )
    return RunOutcome(target.final, summary, manifest, terminal)


def _seeds(seed: int, users: Sequence[tuple[str, UserPolicy]]) -> dict[str, Any]:
    """The run's ``seed`` and what is derived from it (:mod:`evidence_bench.seeding`): each
    random user's seed (the run's plus its own ``seed``) and its per-document draws, and the
    shuffled control's labels, dealt per policy, query and round."""
    return {
        "seed": seed,
        "users": {
            name: int(own)
            for name, user in users
            if (own := getattr(user, "seed", None)) is not None
        },
        "user_draws": derivation("user seed", "query_id", "round", "url"),
        "shuffled": derivation("seed", "policy", "query_id", "round"),
        # how the report's randomization tests draw their signs from ``seed``
        "randomization": RANDOMIZATION_SEED,
    }


def _no_judged_hits(query_set: QuerySet, documents: Mapping[str, Any], replayed: int) -> str:
    """Why the scores mean nothing: no URL the cassettes answered with is one the qrels
    judge. From a collection's cassettes that is a mistake (typically a ``query_set.name``
    other than the collection they were recorded from, which names the documents' host);
    from live ones it is where judging starts (``pool``, ``assess``, ``query_set.qrels``)."""
    retrieved = next(iter(documents), "none")
    judged = next((url for grades in query_set.qrels.values() for url in grades), "none")
    found = (
        f"no retrieved URL matches a judged document in any of {replayed} queries replayed "
        f"from {query_set.cassettes} (retrieved e.g. {retrieved}, judged e.g. {judged})"
    )
    if query_set.source == "live":
        return (
            f"{found}: every score is 0 until the results are judged (pool the run, judge "
            "the pool with assess, run again with query_set.qrels=FILE)"
        )
    return (
        f"{found}; check that query_set.name={query_set.name!r} names the collection they "
        "were recorded from"
    )


def _replay(requests: Counter[str], skipped_expands: int, on_miss: OnMiss) -> dict[str, Any]:
    """The manifest's ``replay``: how the run's requests were answered (from the cassettes,
    by the simulator on a miss, or skipped), the expand stages skipped, and ``on_miss``."""
    return {
        "replayed": requests["replayed"],
        "simulated": requests["simulated"],
        "skipped": requests["skipped"],
        "skipped_expand_stages": skipped_expands,
        "on_miss": on_miss.value,
    }


def _excluded(per_query: pd.DataFrame, queries: int) -> dict[str, int]:
    """Queries without a row per (config, policy, round, stage, mode): excluded from means."""
    keys = ["config_id", "policy", "round", "stage", "eval_mode"]
    cell = group_codes(per_query, keys)
    query = per_query["query_id"]
    counts: Iterable[tuple[Any, int]]
    if not isinstance(query.dtype, pd.CategoricalDtype):
        cell = None  # (a frame read back without categories: grouped by pandas)
    if cell is not None and len(cell):
        # by codes (a sweep's millions of rows): each cell's distinct (cell, query) pairs
        width = max(len(query.cat.categories), 1)
        codes = query.cat.codes.to_numpy()
        space = int(cell.max()) + 1
        if (codes < 0).any():
            cell = None
        elif space * width <= max(4 * len(cell), 1 << 20):
            # a (cell, query) table of a few bits per row: marked, not hashed or sorted
            seen = np.zeros(space * width, dtype=bool)
            seen[cell * width + codes] = True
            sizes = np.count_nonzero(seen.reshape(space, width), axis=1)
            del seen
            first = np.full(space, len(cell), dtype=np.int64)  # each cell's first row
            np.minimum.at(first, cell, np.arange(len(cell)))
            short = np.flatnonzero((first < len(cell)) & (sizes < queries))  # in code order
            names = per_query.iloc[first[short]][keys].itertuples(index=False, name=None)
            counts = zip(names, sizes[short].tolist(), strict=True)
        else:
            # hashed, not sorted: each row's cell numbered as first met, its distinct queries
            where, first = first_met(cell)
            pairs = pd.unique(where * width + codes)
            sizes = np.bincount(pairs // width, minlength=len(first))
            order = np.argsort(cell[first], kind="stable")  # the cells' code order, as before
            names = per_query.iloc[first[order]][keys].itertuples(index=False, name=None)
            counts = zip(names, sizes[order].tolist(), strict=True)
    if cell is None or not len(cell):
        counts = per_query.groupby(keys, sort=False)["query_id"].nunique().items()
    del cell
    excluded: dict[str, int] = {}
    for key, n in counts:
        if n < queries:
            assert isinstance(key, tuple)
            excluded["|".join(str(part) for part in key)] = queries - int(n)
    return excluded
