"""A short plain-text summary for the terminal at the end of a run.

It shows the leading measure at the first feedback round (the verdict's: later rounds build
on earlier feedback): per configuration, user and feedback stage, the three rankings' means
(before, no-feedback control, with feedback), the gain attributable to feedback with its 95%
CI and the Holm-adjusted p, and for rerank what the user's judgments add (rerank − shuffled).
A sweep has too many rows for a terminal, so baselines come first and then the largest gains.
A policy that gave no label of a kind it should give (``labels.missing`` in the manifest)
gets a warning line at the end.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from evidence_bench.evaluation.statistics import MIN_TRIALS
from evidence_bench.report.numbers import missing, number, p_value
from evidence_bench.report.numbers import signed_ascii as _signed
from evidence_bench.report.render import load_source
from evidence_bench.report.tables import ALPHA, Analysis
from evidence_bench.runs.data import RunData
from evidence_bench.users.labels import label_warnings

__all__ = ["summary_table"]

_LABEL_WIDTH = 46


def _clean(text: str) -> str:
    """Labels come from config files; keep control characters out of the terminal."""
    return "".join(c if c.isprintable() else "?" for c in text)


def _printable(text: str, width: int) -> str:
    """One line of at most ``width`` characters: a long text loses its end, marked ``…``."""
    clean = _clean(text)
    return clean if len(clean) <= width else clean[: width - 1] + "…"


def _wrapped(text: str, width: int) -> list[str]:
    """A label on as many lines of at most ``width`` as it needs, broken between its words
    (``beta=0.75``, ``gamma=0.15``): nothing of it is cut, so a sweep's labels, which
    differ at their end, stay told apart. A word longer than the width is split."""
    return textwrap.wrap(_clean(text), width, break_long_words=True, break_on_hyphens=False) or [""]


def _gain(row: Mapping[Any, Any]) -> str:
    low, high = _signed(row["gain_ci_low"]), _signed(row["gain_ci_high"])
    return f"{_signed(row['gain'])} [{low}, {high}]"


def _judgment(row: Mapping[Any, Any]) -> str:
    """Compact: rerank − shuffled and a star where its Holm p is below ALPHA."""
    value = row.get("judgment_gain")
    if value is None or math.isnan(value):
        return "–"
    return _signed(value) + (" *" if bool(row.get("judgment_significant")) else "")


def _p(value: float | None, significant: bool) -> str:
    return p_value(value) + (" *" if significant and not missing(value) else "")


def summary_table(
    source: Path | RunData | Analysis, *, trials: int = MIN_TRIALS, max_rows: int = 24
) -> str:
    """The summary as aligned plain text (no colour codes), ready to print."""
    analysis = load_source(source, trials=trials)
    labels = analysis.data.manifest.get("labels")
    warnings = "".join(_printable(line, 400) + "\n" for line in label_warnings(labels))
    return _table(analysis, max_rows) + warnings


def _table(analysis: Analysis, max_rows: int) -> str:
    settings = analysis.data.settings
    s = analysis.summary
    compared = s[(s["measure"] == settings.primary_measure) & s["gain"].notna()]
    if compared.empty:
        if analysis.missing_controls:
            return (
                f"{settings.experiment}: {' and '.join(analysis.missing_controls)} without "
                "their no-feedback controls; re-run to compare on equal footing.\n"
            )
        if s[s["measure"] == settings.primary_measure]["fixed"].any():
            return (
                f"{settings.experiment}: {settings.primary_measure} cannot change in frozen "
                "mode (the examined documents hold every rank it reads); see report.html.\n"
            )
        return f"{settings.experiment}: no feedback round to compare.\n"
    first = int(compared["round"].min())
    rows = compared[compared["round"] == first]
    hidden = 0
    if len(rows) > max_rows:
        baselines = rows[rows["role"] == "baseline"]
        others = rows[rows["role"] != "baseline"].sort_values("gain", ascending=False)
        keep = max(0, max_rows - len(baselines))
        hidden = len(others) - keep
        rows = pd.concat([baselines.head(max_rows), others.head(keep)])
    header = ("configuration", "user", "stage", "before", "control", "feedback",
              "gain [95% CI]", "+/-/=", "p(Holm)", "judgments add")  # fmt: skip
    lines: list[tuple[str, ...]] = [header]
    for r in rows.to_dict("records"):
        label, *more = _wrapped(str(r["label"]), _LABEL_WIDTH)
        lines.append(
            (
                label,
                _printable(str(r["policy"]), 14),
                str(r["stage"]),
                number(r["before"]),
                number(r["control"]),
                number(r["feedback"]),
                _gain(r),
                f"{int(r['improved'])}/{int(r['degraded'])}/{int(r['unchanged'])}",
                _p(r["p_holm"], bool(r["significant"])),
                _judgment(r),
            )
        )
        lines += [(line, *[""] * (len(header) - 1)) for line in more]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text_columns = 3
    out = [
        f"{settings.experiment} on {settings.query_set}: {settings.primary_measure} at "
        f"{settings.primary_mode} "
        f"evaluation, round {first}: gain = with feedback − no-feedback control (expand at "
        f"equal depth; judgments add = rerank − shuffled labels; * Holm-adjusted "
        f"randomization p < {ALPHA})"
    ]
    for line in lines:
        cells = [
            cell.ljust(widths[i]) if i < text_columns else cell.rjust(widths[i])
            for i, cell in enumerate(line)
        ]
        out.append("  ".join(cells).rstrip())
    if hidden:
        out.append(f"... {hidden} more rows in report.html")
    aliases = analysis.data.aliases
    if aliases:
        shared = ", ".join(f"{alias} = {target}" for alias, target in aliases.items())
        out.append(
            f"{len(aliases)} of {len(analysis.data.configs)} configurations have the effective "
            f"parameters of another and share its results (configs.csv alias_of): "
            + _printable(shared, 200)
        )
    best = analysis.best
    if best is not None:
        parts = [
            f"{r['policy']} {_signed(r['gain_common'])} [{_signed(r['best_ci_low'])}, "
            f"{_signed(r['best_ci_high'])}] n={int(r['n_common'])} "
            f"p(Holm) {_p(r['p_holm'], bool(r['significant']))}"
            for r in best.rows.to_dict("records")
        ]
        out += _per_user(
            f"best: {_clean(best.label)} ({best.stage}, round {best.round}; over the "
            f"queries every configuration keeps, 95% CI adjusted for picking the best of "
            f"{best.candidates}): ",
            parts,
        )
        judged = [
            f"{r['policy']} {_signed(r['judgment_gain'])} [{_signed(r['judgment_ci_low'])}, "
            f"{_signed(r['judgment_ci_high'])}] "
            f"p(Holm) {_p(r['judgment_p_holm'], bool(r['judgment_significant']))}"
            for r in best.judgment.to_dict("records")
        ]
        if judged:
            out += _per_user("judgments add (its rerank − shuffled): ", judged)
    return "\n".join(out) + "\n"


def _per_user(head: str, parts: list[str]) -> list[str]:
    """``head`` and the users' entries on one line; for more than :data:`_ONE_LINE` users
    (a validity run's users × seeds × budgets), one indented line each, the first
    :data:`_LISTED` of them, so that no line runs to thousands of characters."""
    if len(parts) <= _ONE_LINE:
        return [head + "; ".join(parts)]
    more = len(parts) - _LISTED
    tail = [f"  ... {more} more users in report.html"] if more > 0 else []
    return [head.rstrip(), *(f"  {part}" for part in parts[:_LISTED]), *tail]


#: How many users' entries share the ``best:`` line; beyond that, one line each, the first
#: ``_LISTED`` shown.
_ONE_LINE, _LISTED = 4, 8
