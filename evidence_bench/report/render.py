"""A run's report: what its page shows, computed from the run's analysis
(:func:`report_context`); :mod:`evidence_bench.report.page` renders and writes it.

The context is plain data (strings, numbers, booleans, None, lists, tuples and dicts of
them) and the charts' SVG, so it can be stored exactly (:mod:`evidence_bench.report.stored`).
Web text (titles, snippets, URLs, queries, refined queries) stays text: the template escapes
it. Only the SVG that :mod:`evidence_bench.report.charts` draws is Markup.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

import pandas as pd

from evidence_bench._forked import both
from evidence_bench.evaluation.statistics import MIN_TRIALS
from evidence_bench.report import charts
from evidence_bench.report.evidence import evidence_table
from evidence_bench.report.labels import labels_view
from evidence_bench.report.numbers import MAX_EPISODES, MINUS, missing
from evidence_bench.report.tables import (
    ALPHA,
    BASELINES,
    CONTROLS,
    Analysis,
    Verdict,
    analyze,
    query_deltas,
    rounds_means,
    sweep_table,
    verdict,
)
from evidence_bench.report.tuning import load_tuning, tuning_view
from evidence_bench.report.validity import validity_view
from evidence_bench.runs.data import (
    RunData,
    gather_multirun,
    load_documents,
    load_episodes,
    load_run,
)

__all__ = ["load_source", "report_context"]

_BASELINES_IN_CHART = 4


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


_RUN_ID_TIME = re.compile(r"^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z")


def _run_id(path: Path, manifest: Mapping[str, Any]) -> str:
    """The run id, also while the runner renders into its ``.<run id>.tmp`` staging dir."""
    if manifest.get("run_id"):
        return str(manifest["run_id"])
    return path.name.removeprefix(".").removesuffix(".tmp")


def _created(run_id: str, manifest: Mapping[str, Any]) -> str:
    if manifest.get("created"):
        return str(manifest["created"])
    stamp = _RUN_ID_TIME.match(run_id)  # run ids start with their UTC creation time
    if stamp:
        y, mo, d, h, mi, sec = stamp.groups()
        return f"{y}-{mo}-{d}T{h}:{mi}:{sec}Z"
    return "–"


def _text(value: Any) -> str:
    return "–" if value is None or value == "" else str(value)


def _header(analysis: Analysis) -> dict[str, Any]:
    data, manifest = analysis.data, analysis.data.manifest
    replay = manifest.get("replay") or {}
    run_id = _run_id(data.path, manifest)
    return {
        "experiment": data.settings.experiment,
        "run_id": run_id,
        "created": _created(run_id, manifest),
        "package_version": _text(manifest.get("package_version")),
        "git_commit": _text(manifest.get("git_commit")),
        "git_dirty": manifest.get("git_dirty") is True,
        "reproduce": _reproduce(manifest, data.settings.experiment),
        "query_set": data.settings.query_set,
        "queries": int(manifest.get("queries", 0) or 0) or len(data.queries),
        "truncated": bool(manifest.get("queries_truncated")),
        "policies": list(data.policies),
        "primary_mode": data.settings.primary_mode,
        "modes": list(data.settings.modes),
        "primary_measure": data.settings.primary_measure,
        "measures": list(data.settings.measures),
        "cassette": _text(manifest.get("cassette_manifest_sha256")),
        "cassettes": _text(manifest.get("cassettes")),
        "collection": _text(manifest.get("collection_checksum")),
        "replay": {k: int(replay.get(k, 0) or 0) for k in ("replayed", "simulated", "skipped")},
        "on_miss": _text(replay.get("on_miss")),
        "seeds": _seeds(manifest.get("seeds")),
        "wall_time_s": float(manifest.get("wall_time_s", 0) or 0),
        # distinct configs (what ran and what Holm counts), and every config asked for
        "configs": int((data.configs["alias_of"] == "").sum()),
        "asked": len(data.configs),
        "aliases": data.aliases,
        "rounds": data.settings.rounds,
        "jobs": int(manifest.get("jobs", 1) or 1),
        "exclusions": analysis.exclusions.to_dict("records"),
        "trials": analysis.trials,
        "seed": analysis.seed,
        "family": analysis.family,
        "missing_dates": _int_or_none(manifest.get("missing_dates")),
        # why every score is 0: live results no judgment names (the run's warning)
        "unjudged_results": str(manifest.get("unjudged_results") or ""),
    }


def _seeds(seeds: Any) -> str:
    """The run's seed and its random users' seeds (``seed 0 · noisy 0``); a multirun's runs
    joined by commas; a run from before seeds were a mapping lists its seeds as they are."""
    if isinstance(seeds, Mapping):
        users = seeds.get("users")
        own = users.items() if isinstance(users, Mapping) else ()
        shown = [f"seed {seeds.get('seed', '?')}", *(f"{u} {s}" for u, s in own)]
        return " · ".join(shown)
    if isinstance(seeds, list) and seeds:
        return ", ".join(_seeds(s) if isinstance(s, Mapping) else str(s) for s in seeds)
    return "–"


def _reproduce(manifest: Mapping[str, Any], experiment: str) -> str:
    """The arguments after ``python -m evidence_bench run``: the run's own command-line
    overrides, shell-quoted so the line can be pasted; without them, its experiment."""
    overrides = manifest.get("overrides")
    if isinstance(overrides, list) and all(isinstance(o, str) for o in overrides):
        return " ".join(shlex.quote(o) for o in overrides)
    return f"+experiment={experiment}"


def _int_or_none(value: Any) -> int | None:
    """A manifest count, or None where the run did not record it (or wrote nonsense)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _collapsed(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One group for all configs when they scored identically, as the provider's order and
    the no-feedback control of round 0 usually do: 27 copies of a row tell the reader nothing."""

    def key(group: dict[str, Any]) -> list[tuple[Any, ...]]:
        return [
            (u["policy"], s, r["n"], round(r["mean"], 12))
            for u in group["users"]
            for s in ("initial", "control")
            if (r := u[s]) is not None
        ]

    if len(groups) < 2 or any(key(g) != key(groups[0]) for g in groups[1:]):
        return groups
    return [{**groups[0], "config_id": "*", "label": "All configurations", "role": "all"}]


def _config_group(
    config_id: str, rows: Sequence[Mapping[Any, Any]], users: list[Any]
) -> dict[str, Any]:
    return {
        "config_id": config_id,
        "label": str(rows[0]["label"]),
        "role": str(rows[0]["role"]),
        "users": users,
        "span": sum(max(1, len(u.get("stages", [None]))) for u in users),
    }


def _round0_views(analysis: Analysis) -> dict[str, list[dict[str, Any]]]:
    """Per measure: each config's round-0 provider order and no-feedback control, per user."""
    configs = analysis.data.configs
    # plain dicts, not a DataFrame's ``.at`` per record
    label = dict(zip(configs["config_id"], configs["label"], strict=True))
    role = dict(zip(configs["config_id"], configs["role"], strict=True))
    order = {c: i for i, c in enumerate(configs["config_id"])}
    policies = {p: i for i, p in enumerate(analysis.data.policies)}
    records = sorted(
        analysis.round0.to_dict("records"),
        key=lambda r: (r["measure"], order.get(r["config_id"], 0), policies.get(r["policy"], 0)),
    )
    views: dict[str, list[dict[str, Any]]] = {}
    for measure, by_measure in groupby(records, key=itemgetter("measure")):
        groups = []
        for config_id, by_config in groupby(by_measure, key=itemgetter("config_id")):
            rows = [{**r, "label": label[config_id], "role": role[config_id]} for r in by_config]
            users = []
            for policy, by_policy in groupby(rows, key=itemgetter("policy")):
                stages = {r["stage"]: r for r in by_policy}
                users.append(
                    {
                        "policy": policy,
                        "initial": stages.get("initial"),
                        "control": stages.get("control"),
                    }
                )
            groups.append(_config_group(str(config_id), rows, users))
        views[str(measure)] = _collapsed(groups)
    return views


#: A summary of at most this many configurations shows them all at once.
_ALL_SHOWN = 8
#: Besides the best setting, the baselines and any significant loss, the summary opens with
#: this many configurations of the next largest gains.
_RUNNERS_UP = 3


def _key_configs(analysis: Analysis) -> set[str] | None:
    """The configurations the summary shows before "all": the best setting, the baselines,
    every configuration with a significant loss, and the next largest gains (leading
    measure, the verdict's round); None: show every one (a run of few)."""
    s, best = analysis.summary, analysis.best
    configs = set(s["config_id"])
    if len(configs) <= _ALL_SHOWN or best is None:
        return None
    mine = s[s["measure"] == analysis.data.settings.primary_measure]
    key = {best.config_id}
    key |= set(mine.loc[mine["role"] == "baseline", "config_id"])
    key |= set(mine.loc[mine["significant"] & (mine["gain_common"] < 0), "config_id"])
    first = mine[(mine["round"] == best.round) & (mine["role"] != "baseline")]
    ranked = (
        first.groupby("config_id", sort=False)["gain_common"]
        .mean()
        .sort_values(ascending=False, kind="stable")
    )
    key |= set([str(c) for c in ranked.index if str(c) not in key][:_RUNNERS_UP])
    return key if key < configs else None


def _summary_views(analysis: Analysis) -> list[dict[str, Any]]:
    """Per measure, round and config: each user's feedback-stage rows (before, control,
    feedback, gain), and round 0 as the reference.

    Plain-Python grouping over records: the summary is already sorted.
    """
    records = analysis.summary.to_dict("records")
    key = _key_configs(analysis)
    judged = analysis.judged
    for record in records:
        cell = (str(record["config_id"]), str(record["policy"]), int(record["round"]))
        record["judged"] = judged.get((*cell, str(record["stage"])))
    start = _round0_views(analysis)
    measures = list(dict.fromkeys([*analysis.data.settings.measures, *start]))
    by_measure = {m: list(rows) for m, rows in groupby(records, key=itemgetter("measure"))}
    views = []
    for measure in measures:
        rounds = []
        for round_, by_round in groupby(by_measure.get(measure, []), key=itemgetter("round")):
            groups = []
            for config_id, by_config in groupby(by_round, key=itemgetter("config_id")):
                rows = list(by_config)
                users = [
                    {"policy": policy, "stages": list(mine)}
                    for policy, mine in groupby(rows, key=itemgetter("policy"))
                ]
                group = _config_group(str(config_id), rows, users)
                group["minor"] = key is not None and str(config_id) not in key
                groups.append(group)
            rounds.append({"round": int(round_), "groups": groups})
        primary = measure == analysis.data.settings.primary_measure
        views.append(
            {
                "measure": measure,
                "primary": primary,
                "rounds": rounds,
                "start": start.get(measure, []),
            }
        )
    views.sort(key=lambda v: not v["primary"])
    return views


def _selected(deltas: pd.DataFrame, policies: Sequence[str], limit: int) -> pd.DataFrame:
    """Each user's largest losses (up to half its share) and largest gains (the rest of its
    share), ``limit`` in all, largest loss first."""
    quota = max(2, limit // max(1, len(policies)))
    parts = []
    for policy in policies:
        mine = deltas[deltas["policy"] == policy].sort_values(["delta", "query_id"])
        if len(mine) > quota:
            losses = mine[mine["delta"] < 0].head(quota // 2)
            gains = mine.drop(losses.index).tail(quota - len(losses))
            mine = pd.concat([losses, gains])
        parts.append(mine)
    chosen = pd.concat(parts) if parts else deltas.head(0)
    return chosen.sort_values(["delta", "policy", "query_id"], kind="stable")


_FACTORS = ("R", "F", "T", "D", "S")


def _factor(value: Any) -> float | None:
    """A breakdown component as a float, or None where it is missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def _episode_views(analysis: Analysis, chosen: pd.DataFrame) -> list[dict[str, Any]]:
    data, best = analysis.data, analysis.best
    if best is None or chosen.empty:
        return []
    before_stage, control_stage = BASELINES[best.stage]
    picks = chosen.to_dict("records")
    episodes = load_episodes(data, best.config_id, {str(r["query_id"]) for r in picks})
    wanted = [episodes.get((str(r["policy"]), str(r["query_id"]))) for r in picks]
    after_key = "after_expand" if best.stage == "expand" else "after_rerank"
    doc_ids = {
        str(d)
        for ep in wanted
        if ep
        for rd in ep.get("rounds") or []
        for d in [
            *(rd.get("before") or []),
            *(rd.get(after_key) or rd.get("after_rerank") or []),
            *(row.get("doc_id") for row in rd.get("breakdown") or [] if isinstance(row, dict)),
        ]
    }
    docs = load_documents(data, doc_ids)
    qrels = data.qrels[data.qrels["query_id"].isin(set(chosen["query_id"]))]
    grades = {
        (str(q), str(d)): int(g)
        for q, d, g in qrels[["query_id", "doc_id", "relevance"]].itertuples(index=False)
    }
    pq = data.per_query
    # one mask over the run's rows, the others over the config's
    columns = ["policy", "query_id", "round", "stage", "value", "eval_mode", "measure"]
    mine = pq.loc[(pq["config_id"] == best.config_id).to_numpy(), columns]
    mine = mine.loc[
        (
            (mine["eval_mode"] == data.settings.primary_mode)
            & (mine["measure"] == data.settings.primary_measure)
            & mine["stage"].isin([before_stage, control_stage, best.stage])
        ).to_numpy(),
        columns[:5],
    ]
    scores = {
        (str(p), str(q), int(r), str(s)): float(v)
        for p, q, r, s, v in zip(*(mine[c].tolist() for c in mine.columns), strict=True)
    }

    def doc_view(query_id: str, rank: int, doc_id: str, marks: Mapping[str, str]) -> dict[str, Any]:
        doc = docs.get(doc_id, {})
        return {
            "rank": rank,
            "doc_id": doc_id,
            "title": _clip(doc.get("title", ""), 160),
            "url": _clip(doc.get("url", ""), 140),
            "snippet": _clip(doc.get("snippet", ""), 240),
            "grade": grades.get((query_id, doc_id)),
            "mark": marks.get(doc_id),
            "known": doc_id in docs,
        }

    def breakdown_view(query_id: str, rows: Any) -> list[dict[str, Any]]:
        if not isinstance(rows, list):
            return []
        out = []
        for rank, row in enumerate((r for r in rows if isinstance(r, dict)), start=1):
            doc_id = str(row.get("doc_id"))
            view = {
                **doc_view(query_id, rank, doc_id, {}),
                "title": _clip(docs.get(doc_id, {}).get("title", ""), 90),
            }
            out.append({**view, **{f: _factor(row.get(f)) for f in _FACTORS}})
        return out

    views = []
    for row, episode in zip(picks, wanted, strict=True):
        policy, query_id = str(row["policy"]), str(row["query_id"])
        rounds = []
        for rd in (episode or {}).get("rounds") or []:
            r = int(rd.get("round", 0))
            marks = {str(m.get("doc_id")): str(m.get("label")) for m in rd.get("marks") or []}
            after = rd.get(after_key)
            skipped = after is None and best.stage == "expand"
            after = after if after is not None else rd.get("after_rerank") or []
            rounds.append(
                {
                    "round": r,
                    "marks": [
                        {**doc_view(query_id, 0, d, marks), "label": label}
                        for d, label in marks.items()
                    ],
                    "refined_query": rd.get("refined_query"),
                    "added_terms": [str(t) for t in rd.get("added_terms") or []],
                    "added": rd.get("added"),
                    "before": [
                        doc_view(query_id, i, d, marks)
                        for i, d in enumerate(rd.get("before") or [], 1)
                    ],
                    "after": [doc_view(query_id, i, d, {}) for i, d in enumerate(after, 1)],
                    "after_stage": "rerank" if skipped else best.stage,
                    "skipped": skipped,
                    "breakdown": breakdown_view(query_id, rd.get("breakdown")),
                    "initial": scores.get((policy, query_id, r, before_stage)),
                    "control": scores.get((policy, query_id, r, control_stage)),
                    "score": scores.get((policy, query_id, r, best.stage)),
                }
            )
        views.append(
            {
                "policy": policy,
                "query_id": query_id,
                "query": str(row["query"]),
                "before": float(row["before"]),
                "control": float(row["control"]),
                "after": float(row["after"]),
                "delta": float(row["delta"]),
                "found": episode is not None,
                "rounds": rounds,
            }
        )
    return views


def _grid_edges(analysis: Analysis) -> list[dict[str, Any]]:
    """The swept parameters the best setting takes at an end of the grid: the best may lie
    beyond it. A weight of 0 at the low end is a hard limit (Rocchio's weights are never
    negative), so it is no edge."""
    best, data = analysis.best, analysis.data
    if best is None or not data.swept:
        return []
    configs = data.configs[data.configs["role"] != "baseline"].set_index("config_id")
    if best.config_id not in configs.index:
        return []
    edges = []
    for name in data.swept:
        values = pd.to_numeric(configs[name], errors="coerce").dropna()
        mine = pd.to_numeric(pd.Series([configs.at[best.config_id, name]]), errors="coerce")[0]
        if len(values.unique()) < 3 or pd.isna(mine):
            continue
        if mine == values.max():
            edges.append({"param": str(name), "value": float(mine), "side": "largest"})
        elif mine == values.min() and mine != 0:
            edges.append({"param": str(name), "value": float(mine), "side": "smallest"})
    return edges


def _best_view(analysis: Analysis) -> dict[str, Any] | None:
    best = analysis.best
    if best is None:
        return None
    before_stage, control_stage = BASELINES[best.stage]
    return {
        "edges": _grid_edges(analysis),
        "config_id": best.config_id,
        "label": best.label,
        "stage": best.stage,
        "round": best.round,
        "rows": best.rows.to_dict("records"),
        "last_round": best.last_round,
        "last_rows": best.last_rows.to_dict("records"),
        "judgment": best.judgment.to_dict("records"),
        "before_stage": before_stage,
        "control_stage": control_stage,
        "candidates": best.candidates,
    }


def _shuffled_seed(seeds: Any) -> str | None:
    """How the shuffled control's labels were dealt, where the manifest says."""
    if isinstance(seeds, list):  # a multirun: the derivation is the same in every job
        seeds = next((s for s in seeds if isinstance(s, Mapping)), None)
    value = seeds.get("shuffled") if isinstance(seeds, Mapping) else None
    return str(value) if value else None


def _tuning(analysis: Analysis) -> dict[str, Any] | None:
    """A tuning run's section (report/tuning.py), or None."""
    tuning = load_tuning(analysis.data.path, analysis.data.manifest)
    return None if tuning is None else tuning_view(tuning, trials=analysis.trials)


def _rounds_n(means: pd.DataFrame, best: Any, measure: str) -> list[dict[str, Any]]:
    """Per user, the queries each round's means of the rounds chart are over."""
    mine = means[(means["config_id"] == best.config_id) & (means["measure"] == measure)]
    line = mine[
        ((mine["round"] == 0) & (mine["stage"] == "initial"))
        | ((mine["round"] > 0) & (mine["stage"] == best.stage))
    ].sort_values("round")
    return [
        {
            "policy": str(policy),
            "counts": [(int(r), int(n)) for r, n in zip(g["round"], g["n"], strict=True)],
        }
        for policy, g in line.groupby("policy", sort=False)
    ]


def _share(value: Any) -> str:
    """A share of the oracle's gain as a percentage: ``83%``, ``−12%``."""
    return "–" if missing(value) else f"{100.0 * float(value):.0f}%".replace("-", MINUS)


def _shares_view(analysis: Analysis) -> dict[str, Any] | None:
    """The share-of-the-oracle table for one config: the best setting's, else the first."""
    shares = analysis.shares
    if shares.empty:
        return None
    best = analysis.best
    config_id = str(shares["config_id"].iloc[0])
    if best is not None and (shares["config_id"] == best.config_id).any():
        config_id = best.config_id
    mine = shares[shares["config_id"] == config_id]
    labels = analysis.data.configs.set_index("config_id")["label"]
    rows = [
        {
            "policy": str(r["policy"]),
            "round": int(r["round"]),
            "stage": str(r["stage"]),
            "n": int(r["n"]),
            "gain": r["gain"],
            "oracle_gain": r["oracle_gain"],
            "share": _share(r["share"]),
            "share_value": r["share"],
            "ci": (
                "unbounded"
                if missing(r["share_ci_low"])
                else f"[{_share(r['share_ci_low'])}, {_share(r['share_ci_high'])}]"
            ),
        }
        for r in mine.to_dict("records")
    ]
    return {"config_id": config_id, "label": str(labels.get(config_id, config_id)), "rows": rows}


def _verdict_view(found: Verdict) -> dict[str, Any]:
    """What the page shows of the verdict (the best setting is ``best``'s view)."""
    return {
        "outcome": found.outcome,
        "comparisons": found.comparisons,
        "significant_gains": found.significant_gains,
        "significant_losses": found.significant_losses,
        "hurt": found.hurt,
        "worst": found.worst.to_dict("records"),
        "last_gains": found.last_gains,
        "last_losses": found.last_losses,
        "by_query_set": [
            {
                "query_set": name,
                "outcome": outcome,
                "label": best.label.removeprefix(f"{name} · ") if best is not None else None,
                "stage": best.stage if best is not None else None,
                "candidates": best.candidates if best is not None else 0,
                "rows": best.rows.to_dict("records") if best is not None else [],
            }
            for name, outcome, best in found.by_query_set
        ],
    }


def report_context(
    analysis: Analysis, max_episodes: int = MAX_EPISODES, *, processes: int = 1
) -> dict[str, Any]:
    """Everything the report's template shows, as plain data and the charts' SVG.

    ``processes`` above 1: what the best setting shows (the verdict, its charts and
    episodes) is computed in a process forked from this one while this one computes the
    rest; the context is the same either way."""
    context, shown = both(
        lambda: _context(analysis),
        lambda: _best_context(analysis, max_episodes),
        processes=processes,
    )
    context.update(shown)  # (the keys it holds keep their places; "verdict" comes last)
    return context


def _context(analysis: Analysis) -> dict[str, Any]:
    """The context but for what the best setting shows (:func:`_best_context`), which it
    holds empty."""
    data = analysis.data
    return {
        "header": _header(analysis),
        "summaries": _summary_views(analysis),
        "summary_hidden": len(set(analysis.summary["config_id"]) - key)
        if (key := _key_configs(analysis)) is not None
        else 0,
        "alpha": ALPHA,
        "baselines": BASELINES,
        "configs": data.configs.to_dict("records"),
        "config_columns": list(data.configs.columns),
        "swept": list(data.swept),
        "best": _best_view(analysis),
        "missing_controls": list(analysis.missing_controls),
        "labels": labels_view(data.manifest, data.policies),
        "shuffled_seed": _shuffled_seed(data.manifest.get("seeds")),
        # Runs from before the shuffled-label control have no judgment columns to show.
        "judgments": bool(analysis.summary["judgment_gain"].notna().any()),
        "forest": None,
        "sweep": None,
        "deltas": None,
        "episodes": [],
        "episodes_total": 0,
        "rounds_chart": None,
        "rounds_configs": [],
        "rounds_n": [],
        "won": 0,
        "tuning": _tuning(analysis),
        "shares": _shares_view(analysis),
        "validity": validity_view(analysis.validity) if analysis.validity else None,
        "evidence": _evidence_view(analysis),
    }


def _best_context(analysis: Analysis, max_episodes: int) -> dict[str, Any]:
    """The verdict, and what the report shows of its best setting: the forest, the sweep's
    heatmap, the per-query deltas, the episodes (up to ``max_episodes``) and the rounds."""
    data, best, s = analysis.data, analysis.best, analysis.summary
    measure = data.settings.primary_measure
    context: dict[str, Any] = {}
    if best is None:
        context["verdict"] = _verdict_view(
            verdict(analysis, pd.DataFrame(columns=["delta", "policy", "query_id"]))
        )
        return context
    deltas = query_deltas(data, best.config_id, best.stage, best.round)
    context["verdict"] = _verdict_view(verdict(analysis, deltas))
    context["won"] = int((best.rows["significant"] & (best.rows["gain_common"] > 0)).sum())
    first = s[(s["measure"] == measure) & (s["round"] == best.round) & ~s["fixed"]]
    stages = [st for st in BASELINES if st in set(first["stage"])]
    context["forest"] = charts.forest_chart(
        first, stages, data.policies, measure, "forest", CONTROLS
    )
    table = sweep_table(data, s, best)
    if table is not None:
        context["sweep"] = {
            "chart": charts.heatmap_chart(
                table, data.swept, data.policies, measure, best.config_id, "sweep"
            ),
            "size": table["config_id"].nunique(),
            "aliases": sorted(
                {(str(a), str(t)) for a, t in table[["config_id", "alias_of"]].values if t}
            ),
        }
    if len(deltas):
        counts = {
            str(r["policy"]): (int(r["improved"]), int(r["degraded"]), int(r["n"]))
            for r in best.rows.to_dict("records")
        }
        context["deltas"] = charts.delta_chart(deltas, data.policies, measure, counts, "deltas")
        context["episodes"] = _episode_views(
            analysis, _selected(deltas, data.policies, max_episodes)
        )
        context["episodes_total"] = len(deltas)
    baselines = data.configs[data.configs["role"] == "baseline"]
    others = [
        (str(c), str(label))
        for c, label in baselines[["config_id", "label"]].itertuples(index=False)
        if c != best.config_id and data.strata.get(c) == data.strata.get(best.config_id)
    ]
    shown = [(best.config_id, best.label), *others[:_BASELINES_IN_CHART]]
    context["rounds_configs"] = shown
    means = rounds_means(data, [c for c, _ in shown], best.stage)
    context["rounds_n"] = _rounds_n(means, best, measure)
    context["rounds_chart"] = charts.rounds_chart(
        means,
        shown,
        data.settings.measures,
        data.policies,
        best.stage,
        CONTROLS[best.stage],
        "rounds",
    )
    return context


def _evidence_view(analysis: Analysis) -> dict[str, Any] | None:
    """The Evidence section's rows (report/evidence.py), a configuration's name on its first."""
    table = evidence_table(analysis.data)
    if table is None:
        return None
    rows = table.to_dict("records")
    for i, row in enumerate(rows):
        row["first"] = i == 0 or rows[i - 1]["group"] != row["group"]
    return {"round": 1, "rows": rows}


def load_source(source: Path | RunData | Analysis, *, trials: int = MIN_TRIALS) -> Analysis:
    """An :class:`Analysis` from a run directory, a multirun directory, or loaded data."""
    if isinstance(source, Analysis):
        return source
    if isinstance(source, RunData):
        return analyze(source, trials=trials)
    path = Path(source)
    jobs = path.is_dir() and any(p.is_dir() and p.name.isdigit() for p in path.iterdir())
    if (path / "manifest.json").is_file() or not jobs:
        return analyze(load_run(path), trials=trials)
    return analyze(gather_multirun(path), trials=trials)
