"""A short plain-text summary for the terminal at the end of a run.

It shows the leading measure at the last round: per configuration, user and feedback stage,
the initial and feedback means, the change, the query counts and the Holm-adjusted p. A sweep
has too many rows for a terminal, so baselines come first and then the largest changes.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from evidence_bench.report.data import RunData
from evidence_bench.report.render import load_source
from evidence_bench.report.tables import ALPHA, Analysis

__all__ = ["summary_table"]

_LABEL_WIDTH = 38


def _printable(text: str, width: int) -> str:
    """Labels come from config files; keep control characters out of the terminal."""
    clean = "".join(c if c.isprintable() else "?" for c in text)
    return clean if len(clean) <= width else clean[: width - 1] + "…"


def _num(value: float, signed: bool = False) -> str:
    if math.isnan(value):
        return "–"
    text = f"{value:+.3f}" if signed else f"{value:.3f}"
    return text[1:] if signed and float(text) == 0 else text


def summary_table(
    source: Path | RunData | Analysis, *, trials: int = 5000, max_rows: int = 24
) -> str:
    """The summary as aligned plain text (no colour codes), ready to print."""
    analysis = load_source(source, trials=trials)
    settings = analysis.data.settings
    s = analysis.summary
    compared = s[(s["measure"] == settings.primary_measure) & s["delta"].notna()]
    if compared.empty:
        return f"{settings.experiment}: no feedback round to compare.\n"
    last = int(compared["round"].max())
    rows = compared[compared["round"] == last]
    hidden = 0
    if len(rows) > max_rows:
        baselines = rows[rows["role"] == "baseline"]
        others = rows[rows["role"] != "baseline"].sort_values("delta", ascending=False)
        keep = max(0, max_rows - len(baselines))
        hidden = len(others) - keep
        rows = pd.concat([baselines.head(max_rows), others.head(keep)])
    header = (
        "configuration",
        "user",
        "stage",
        "initial",
        "after",
        "Δ",
        "Δ%",
        "+/-/=",
        "p(Holm)",
    )
    lines = [header]
    for r in rows.to_dict("records"):
        counts = f"{int(r['improved'])}/{int(r['degraded'])}/{int(r['unchanged'])}"
        pct = (
            "–"
            if math.isnan(r["delta_pct"])
            else f"{r['delta_pct']:+.1f}%".replace("+0.0%", "0.0%")
        )
        mark = " *" if r["significant"] else ""
        lines.append(
            (
                _printable(str(r["label"]), _LABEL_WIDTH),
                _printable(str(r["policy"]), 14),
                str(r["stage"]),
                _num(r["base_mean"]),
                _num(r["mean"]),
                _num(r["delta"], signed=True),
                pct,
                counts,
                f"{r['p_rand_holm']:.3f}{mark}",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text_columns = 3
    out = [
        f"{settings.experiment}: {settings.primary_measure} at {settings.primary_mode} "
        f"evaluation, round {last}, each stage against the initial ranking "
        f"(* Holm-adjusted randomization p < {ALPHA})"
    ]
    for line in lines:
        cells = [
            cell.ljust(widths[i]) if i < text_columns else cell.rjust(widths[i])
            for i, cell in enumerate(line)
        ]
        out.append("  ".join(cells).rstrip())
    if hidden:
        out.append(f"... {hidden} more rows in report.html")
    best = analysis.best
    if best is not None:
        parts = [
            f"{r['policy']} {_num(r['delta'], signed=True)} "
            f"[{_num(r['delta_ci_low'], signed=True)}, {_num(r['delta_ci_high'], signed=True)}]"
            for r in best.rows.to_dict("records")
        ]
        out.append(f"best: {_printable(best.label, 80)} ({best.stage}): " + "; ".join(parts))
    return "\n".join(out) + "\n"
