"""``run +experiment=rocchio_tune``: cross-validated tuning, written as a run directory.

Besides ``tuning.csv`` (every trial), ``folds.csv`` (each fold's choice and held-out
scores) and ``heldout.csv`` (each query's held-out values), the run holds two configs in
the usual files: ``c00``, the default weights, and ``c01``, each query scored with the
weights its fold chose without it; both replayed in full on every query.
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from evidence_bench._resources import distribution_version
from evidence_bench.collections.queryset import QuerySet, load_query_set
from evidence_bench.errors import DataError, EvidenceBenchError
from evidence_bench.evidence import Evidence
from evidence_bench.experiment.components import EngineConfig
from evidence_bench.experiment.progress import progress_bar
from evidence_bench.experiment.run import (
    RunOutcome,
    RunReport,
    _excluded,
    _git_state,
    _no_judged_hits,
    _provenance,
    _replay,
    _seeds,
    run_directory,
)
from evidence_bench.experiment.rundir import (
    RunDirectory,
    summarize_scores,
    write_inputs,
    write_json,
    write_rows,
)
from evidence_bench.experiment.runner import QueryOutput, plan_users
from evidence_bench.experiment.tune.evaluate import EpisodeScorer
from evidence_bench.experiment.tune.folds import FOLD_SEED
from evidence_bench.experiment.tune.plan import TunePlan, check_folds, plan_tuning
from evidence_bench.experiment.tune.search import (
    SAMPLER_SEED,
    CrossValidation,
    Trial,
    cross_validate,
    sampler_seed,
)
from evidence_bench.runs.checksums import MANIFEST_KEY as TABLES_KEY
from evidence_bench.runs.checksums import table_checksums
from evidence_bench.runs.store import TableBuilder, as_stored, write_tables
from evidence_bench.users.labels import label_summary

__all__ = ["FOLD_COLUMNS", "HELDOUT_COLUMNS", "perform_tune"]

DEFAULT_ID, TUNED_ID = "c00", "c01"
HELDOUT_COLUMNS = ["fold", "query_id", "default_control", "default", "tuned_control", "tuned"]
FOLD_COLUMNS = [
    "fold", "train_queries", "heldout_queries", "trial", "{params}", "train_score",
    "heldout_n", "heldout_score", "default_heldout_score", "heldout_gain",
]  # fmt: skip
#: Held-out values of one query scored twice (search, then the full replay) may differ by
#: no more than float noise.
_SAME = 1e-12


def perform_tune(
    cfg: Mapping[str, Any],
    config_yaml: str,
    *,
    run_dir: Path | None = None,
    overrides: Sequence[str] | None = None,
    report: RunReport | None = None,
) -> RunOutcome:
    """Tune ``experiment.tune.space`` by k-fold cross-validation and write the run (its
    directory reserved first, as ``perform_run`` does); ``report`` renders its report."""
    started = time.perf_counter()
    plan = plan_tuning(cfg, overrides)
    target = run_directory(cfg, config_yaml, plan.run.experiment, run_dir)
    target.reserve()
    try:
        return _tune(cfg, config_yaml, plan, target, overrides, started, report)
    finally:
        target.release()  # a run that failed leaves nothing; a finished one is kept


def _tune(
    cfg: Mapping[str, Any],
    config_yaml: str,
    plan: TunePlan,
    target: RunDirectory,
    overrides: Sequence[str] | None,
    started: float,
    report: RunReport | None,
) -> RunOutcome:
    query_set = load_query_set(plan.run.query_set, limit=plan.run.query_limit)
    query_ids = list(query_set.queries)
    check_folds(plan, len(query_ids))
    workers = int(cfg.get("workers", 0)) or os.cpu_count() or 1
    bar = progress_bar(
        None, total=plan.folds * plan.trials, desc=plan.run.experiment, unit="trial",
        enabled=bool(cfg.get("progress", True)),
    )  # fmt: skip

    def progress(_trial: Trial) -> None:
        bar.update()

    try:
        with EpisodeScorer(plan.run, plan.objective, query_ids, workers=workers) as scorer:
            search_started = time.perf_counter()
            cv = cross_validate(
                query_ids,
                lambda params, ids: scorer.gains(plan.engine(params, TUNED_ID), ids),
                plan.space,
                plan.default_params(),
                folds=plan.folds,
                trials=plan.trials,
                startup_trials=plan.startup_trials,
                seed=plan.run.seed,
                on_trial=progress,
            )
            search_s = time.perf_counter() - search_started
            search_episodes = scorer.episodes
            fold_of = {q: f.fold for f in cv.folds for q in f.heldout}
            tuned = {f.fold: plan.engine(f.chosen.params, TUNED_ID) for f in cv.folds}
            default = plan.engine(plan.default_params(), DEFAULT_ID)
            outputs = scorer.outputs({q: (default, tuned[fold_of[q]]) for q in query_ids})
            episodes, requests = scorer.episodes, scorer.requests
    finally:
        bar.close()

    replayed = sum(out.replayed_initial for out in outputs)
    if replayed and not sum(out.judged_hits for out in outputs):
        raise DataError(_no_judged_hits(query_set, _documents(outputs), replayed))
    heldout = _heldout_rows(plan, outputs, fold_of)
    _check_heldout(cv, heldout)
    builder = TableBuilder()
    for out in outputs:
        builder.add(out.rows)
    feedback = builder.feedback()
    tables = builder.tables(query_set.qrels)
    per_query = tables.scores
    manifest = _manifest(
        plan, cfg, overrides, query_set, outputs, per_query, episodes, requests, len(query_ids)
    )
    manifest["tuning"].update(
        search_wall_time_s=round(search_s, 3),
        search_episodes=search_episodes,
        distinct_points=len({tuple(t.params.items()) for t in cv.trials}),
    )

    summary = summarize_scores(per_query, feedback, query_set.qrels)
    tables = replace(tables, scores=as_stored(per_query), summary=summary)
    with target as tmp:
        (tmp / "config.yaml").write_text(config_yaml)
        write_tables(tmp, tables)
        _write_configs(tmp, plan, default)
        write_inputs(tmp, _documents(outputs), query_set)
        _write_tuning(tmp, plan, cv, heldout)
        manifest["run_id"] = target.final.name
        manifest["created"] = datetime.now(UTC).isoformat(timespec="seconds")
        manifest["wall_time_s"] = round(time.perf_counter() - started, 3)
        manifest[TABLES_KEY] = table_checksums(tmp)
        write_json(tmp / "manifest.json", manifest)
        terminal = ""
        if cfg.get("report", True) and report is not None:
            terminal = report(tmp, tables)
    return RunOutcome(target.final, summary, manifest, terminal)


def _heldout_rows(
    plan: TunePlan, outputs: Sequence[QueryOutput], fold_of: Mapping[str, int]
) -> list[list[Any]]:
    objective = plan.objective
    rows = []
    for out in outputs:
        cells = objective.values(out.scores)
        mine: list[Any] = [fold_of[out.query_id], out.query_id]
        for config_id in (DEFAULT_ID, TUNED_ID):
            cell = cells.get(config_id, {})
            mine += [cell.get(objective.control, math.nan), cell.get(objective.stage, math.nan)]
        rows.append(mine)
    return rows


def _check_heldout(cv: CrossValidation, rows: Sequence[Sequence[Any]]) -> None:
    """The search's held-out values and the full replay's must agree: one number, two paths."""
    by_query = {str(r[1]): r for r in rows}
    for fold in cv.folds:
        for name, gains, value, control in (
            ("tuned", fold.tuned, 5, 4),
            ("default", fold.default, 3, 2),
        ):
            for query_id in fold.heldout:
                row = by_query[query_id]
                replayed = float(row[value]) - float(row[control])
                searched = gains.get(query_id, math.nan)
                both_missing = math.isnan(replayed) and math.isnan(searched)
                if not both_missing and not abs(replayed - searched) <= _SAME:
                    raise EvidenceBenchError(
                        f"query {query_id!r}: the {name} held-out gain differs between the "
                        f"search ({searched!r}) and the full replay ({replayed!r})"
                    )


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values) if values else math.nan


def _write_tuning(
    tmp: Path, plan: TunePlan, cv: CrossValidation, heldout: Sequence[Sequence[Any]]
) -> None:
    names = list(plan.space.names)
    chosen = {(f.fold, f.chosen.number) for f in cv.folds}
    write_rows(
        tmp / "tuning.csv",
        ["fold", "trial", *names, "train_score", "train_n", "chosen"],
        (
            [
                t.fold,
                t.number,
                *(t.params[n] for n in names),
                _float(t.score),
                t.queries,
                int((t.fold, t.number) in chosen),
            ]
            for t in cv.trials
        ),
    )
    header = [c for column in FOLD_COLUMNS for c in (names if column == "{params}" else [column])]
    fold_rows = []
    for fold in cv.folds:
        paired = [
            (float(r[5]) - float(r[4]), float(r[3]) - float(r[2]))
            for r in heldout
            if r[0] == fold.fold and not any(math.isnan(float(r[i])) for i in (2, 3, 4, 5))
        ]
        tuned_mean = _mean([t for t, _d in paired])
        default_mean = _mean([d for _t, d in paired])
        fold_rows.append(
            [fold.fold, len(fold.train), len(fold.heldout), fold.chosen.number]
            + [fold.chosen.params[n] for n in names]
            + [_float(fold.chosen.score), len(paired), _float(tuned_mean)]
            + [_float(default_mean), _float(_mean([t - d for t, d in paired]))]
        )
    write_rows(tmp / "folds.csv", header, fold_rows)
    write_rows(
        tmp / "heldout.csv",
        HELDOUT_COLUMNS,
        ([r[0], r[1], *(_float(v) for v in r[2:])] for r in heldout),
    )


def _float(value: float) -> str:
    """As ``write_csv`` writes floats (10 significant digits); empty for NaN."""
    return "" if math.isnan(value) else f"{value:.10g}"


def _write_configs(tmp: Path, plan: TunePlan, default: EngineConfig) -> None:
    params = default.params()
    tuned = {**params, **dict.fromkeys(plan.space.names, "")}  # per fold: folds.csv
    searched = ", ".join(plan.space.names)
    labels = {
        DEFAULT_ID: f"{default.label} (default)",
        TUNED_ID: f"{default.ranker} tuned by {plan.folds}-fold CV ({searched})",
    }
    write_rows(
        tmp / "configs.csv",
        ["config_id", "label", "ranker", "refiner", "role", "alias_of", *params],
        (
            [config_id, labels[config_id], default.ranker, default.refiner, default.role, ""]
            + [values[k] for k in params]
            for config_id, values in ((DEFAULT_ID, params), (TUNED_ID, tuned))
        ),
    )


def _documents(outputs: Sequence[QueryOutput]) -> dict[str, Evidence]:
    """Every document the outputs showed, by key, in the order first seen."""
    documents: dict[str, Evidence] = {}
    for out in outputs:
        for key, evidence in out.documents.items():
            documents.setdefault(key, evidence)
    return documents


def _manifest(
    plan: TunePlan,
    cfg: Mapping[str, Any],
    overrides: Sequence[str] | None,
    query_set: QuerySet,
    outputs: Sequence[QueryOutput],
    per_query: pd.DataFrame,
    episodes: int,
    requests: Counter[str],
    queries: int,
) -> dict[str, Any]:
    users = plan_users(plan.run)
    objective = plan.objective
    return {
        **_provenance(_git_state(), overrides, plan.run.experiment, query_set, queries),
        "seeds": {
            **_seeds(plan.run.seed, users),
            "folds": FOLD_SEED,
            "sampler": SAMPLER_SEED,
            "sampler_seed": sampler_seed(plan.run.seed),
        },
        "episodes": episodes,
        "replay": _replay(requests, sum(out.skipped_expands for out in outputs), plan.run.on_miss),
        "excluded": _excluded(per_query, queries),
        "no_usable_feedback": sum(out.no_usable_feedback for out in outputs),
        "labels": label_summary(
            ((r[0], r[1], r[3], r[5]) for out in outputs for r in out.feedback), users
        ),
        "sweep": {"params": []},
        "configs": {"asked": 2, "distinct": 2, "aliases": {}},
        "tuning": {
            "folds": plan.folds,
            "trials": plan.trials,
            "startup_trials": plan.startup_trials,
            "sampler": "optuna.samplers.TPESampler",
            "optuna_version": distribution_version("optuna"),
            "space": {name: [low, high] for name, low, high in plan.space.bounds},
            "step": plan.space.step,
            "default": plan.default_params(),
            "policy": plan.policy,
            "objective": {
                "stage": objective.stage,
                "control": objective.control,
                "round": objective.round,
                "eval_mode": objective.mode,
                "measure": objective.measure,
            },
            "workers": int(cfg.get("workers", 0)),
        },
    }
