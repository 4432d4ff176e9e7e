"""The report's charts, drawn with matplotlib into inline SVG that is byte-for-byte repeatable.

No pyplot: each chart is a bare :class:`~matplotlib.figure.Figure` saved by the SVG backend
inside an ``rc_context``, so the host program's backend and settings are left alone. Output is
deterministic (a fixed ``svg.hashsalt``, no date in the metadata) and text stays text
(``svg.fonttype='none'``): small, and searchable in the page. Charts only label themselves with
configuration labels, user names and measure names, never web text; matplotlib XML-escapes
every string it writes anyway, and math parsing is off so a ``$`` in a label stays a ``$``.
Element ids are prefixed per chart, because several SVGs share one HTML document.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from markupsafe import Markup, escape
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

__all__ = [
    "budget_chart",
    "delta_chart",
    "forest_chart",
    "heatmap_chart",
    "rounds_chart",
    "variance_chart",
]

GAIN = "#1a7f37"
LOSS = "#cf222e"
#: Okabe & Ito's colour-blind-safe palette, one colour per user.
USER_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#000000")
_CONFIG_COLOURS = ("#0072B2", "#7f7f7f", "#E69F00", "#009E73", "#CC79A7", "#D55E00")
_RC: dict[Any, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "evidence_bench",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 9,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#8c959f",
    "axes.grid": True,
    "grid.color": "#d8dee4",
    "grid.linewidth": 0.6,
    "xtick.color": "#424a53",
    "ytick.color": "#424a53",
    "legend.frameon": False,
}
_ID = re.compile(r'\bid="([^"]+)"')


def _svg(fig: Figure, label: str, key: str) -> Markup:
    """The figure as an inline ``<svg>``: no prolog or metadata, ids prefixed by ``key``."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    ids = sorted(set(_ID.findall(text)), key=len, reverse=True)
    if ids:
        names = "|".join(re.escape(i) for i in ids)
        reference = re.compile(rf'(\bid="|url\(#|href="#)({names})(?=[")])')
        text = reference.sub(lambda m: f"{m.group(1)}{key}-{m.group(2)}", text)
    width = re.search(r'<svg[^>]*? width="([\d.]+)pt"', text)
    # Never wider than drawn: a small chart stretched to the page would have huge type.
    max_width = f' style="max-width: {float(width.group(1)) * 4 / 3:.0f}px"' if width else ""
    text = re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r"<svg\1", text, count=1)
    text = text.replace(
        "<svg", f'<svg class="chart" role="img" aria-label="{escape(label)}"{max_width}', 1
    )
    text = re.sub(r"\n\s*", "\n", text)
    # matplotlib's global ``*{stroke-linejoin...}`` rule would style the whole page.
    text = re.sub(r"<style[^>]*>.*?</style>\s*", "", text, flags=re.DOTALL)
    if "<script" in text.lower() or "javascript:" in text.lower():
        raise ValueError("matplotlib produced an SVG with script content")
    return Markup(text)


def _figure(width: float, height: float) -> Figure:
    return Figure(figsize=(width, height), layout="constrained")


def _fmt(value: Any) -> str:
    """A parameter value as a tick label: ``0.75``, ``1``, or the text of a non-number."""
    return f"{value:g}" if isinstance(value, int | float | np.number) else str(value)


def forest_chart(
    rows: pd.DataFrame,
    stages: Sequence[str],
    policies: Sequence[str],
    measure: str,
    key: str,
    controls: Mapping[str, str] | None = None,
) -> Markup:
    """Attributable gain with its 95% CI per configuration (y) and user (colour), a panel per
    feedback stage titled ``stage − control``.

    ``rows``: summary rows (label, policy, stage, gain, gain_ci_low/high, significant) of one
    measure and round. Filled markers are significant after Holm.
    """
    controls = controls or {}
    labels = list(dict.fromkeys(rows["label"]))
    with rc_context(_RC):
        fig = _figure(4.2 * len(stages) + 1.8, 0.26 * len(labels) * max(1, len(policies)) + 1.2)
        axes = fig.subplots(1, len(stages), sharex=True, sharey=True, squeeze=False)[0]
        step = 0.7 / max(1, len(policies))
        for ax, stage in zip(axes, stages, strict=True):
            ax.axvline(0.0, color="#57606a", linewidth=0.9)
            for p, policy in enumerate(policies):
                sub = rows[(rows["stage"] == stage) & (rows["policy"] == policy)]
                ys = np.array([labels.index(v) for v in sub["label"]], dtype=float)
                ys = ys + (p - (len(policies) - 1) / 2) * step
                colour = USER_COLOURS[p % len(USER_COLOURS)]
                x = sub["gain"].to_numpy(dtype=float)
                err = np.vstack(
                    [
                        x - sub["gain_ci_low"].to_numpy(float),
                        sub["gain_ci_high"].to_numpy(float) - x,
                    ]
                )
                ax.errorbar(x, ys, xerr=err, fmt="none", ecolor=colour, elinewidth=1.2, capsize=2)
                sig = sub["significant"].to_numpy(dtype=bool)
                ax.scatter(x[sig], ys[sig], color=colour, s=22, zorder=3)
                ax.scatter(x[~sig], ys[~sig], facecolor="white", edgecolor=colour, s=22, zorder=3)
            ax.set_title(f"{stage} \u2212 {controls.get(stage, 'control')}")
            ax.set_xlabel(f"gain in {measure} over the control")
            ax.grid(axis="y", visible=False)
        axes[0].set_yticks(range(len(labels)), labels)
        axes[0].set_ylim(len(labels) - 0.5, -0.5)
        handles = [
            Line2D([], [], color=USER_COLOURS[p % len(USER_COLOURS)], marker="o", label=policy)
            for p, policy in enumerate(policies)
        ]
        handles.append(
            Line2D([], [], color="#57606a", marker="o", linestyle="none", label="significant")
        )
        handles.append(
            Line2D(
                [],
                [],
                color="#57606a",
                marker="o",
                markerfacecolor="white",
                linestyle="none",
                label="not significant",
            )
        )
        fig.legend(handles=handles, loc="outside upper right", ncols=len(handles))
        return _svg(fig, f"Gain in {measure} over the control per configuration, 95% CI", key)


def _heat_panel(
    ax: Axes,
    sub: pd.DataFrame,
    axes_params: tuple[str, str],
    ticks: tuple[list[Any], list[Any]],
    norm: TwoSlopeNorm,
    best_config: str,
) -> Any:
    (x_param, y_param), (xs, ys) = axes_params, ticks
    grid = np.full((len(ys), len(xs)), np.nan)
    for row in sub.to_dict("records"):
        i, j = ys.index(row[y_param]), xs.index(row[x_param])
        delta = float(row["gain_common"])
        grid[i, j] = delta
        dark = abs(delta) > 0.6 * float(norm.vmax or 1.0)
        text = f"{delta:+.3f}".replace("-", "\u2212") + ("*" if row["significant"] else "")
        colour = "white" if dark else "#1f2328"
        alias_of = row.get("alias_of") or ""
        if alias_of:  # the same results as another config: shown once more, hatched
            text += f"\n= {alias_of}"
            hatch = Rectangle((j - 0.5, i - 0.5), 1.0, 1.0, fill=False, hatch="///", linewidth=0)
            hatch.set_edgecolor("#8c959f")
            hatch.set_zorder(2)
            ax.add_patch(hatch)
        ax.text(j, i, text, ha="center", va="center", fontsize=8, color=colour)
        if row["config_id"] == best_config:
            outline = Rectangle(
                (j - 0.45, i - 0.45), 0.9, 0.9, fill=False, linewidth=2.5, edgecolor="#1f2328"
            )
            outline.set_zorder(3)
            ax.add_patch(outline)
    mesh = ax.pcolormesh(
        np.arange(len(xs) + 1) - 0.5,
        np.arange(len(ys) + 1) - 0.5,
        np.ma.masked_invalid(grid),
        cmap="RdYlGn",
        norm=norm,
        edgecolors="white",
        linewidth=1.5,
    )
    ax.set_xticks(range(len(xs)), [_fmt(v) for v in xs])
    ax.set_yticks(range(len(ys)), [_fmt(v) for v in ys])
    ax.set_xlabel(x_param)
    ax.set_ylabel(y_param)
    ax.set_facecolor("#f6f8fa")
    for side in ("left", "bottom"):
        ax.spines[side].set_visible(False)
    return mesh


def heatmap_chart(
    table: pd.DataFrame,
    swept: Sequence[str],
    policies: Sequence[str],
    measure: str,
    best_config: str,
    key: str,
) -> Markup:
    """Attributable gain (feedback − control) over the two most varied swept parameters, a
    panel per user and per value of the other swept parameters, each over the queries every
    configuration keeps (``gain_common``; the panel's title gives their number). Significant
    cells (Holm) carry a ``*``; the best is outlined; an alias (a config with the same
    effective parameters as another, not run again) is hatched and names the config it shares.

    ``table``: rows of :func:`~evidence_bench.report.tables.sweep_table`.
    """
    params = sorted(swept, key=lambda p: -table[p].nunique())
    x_param, y_param, rest = params[0], params[1], params[2:]
    xs, ys = sorted(table[x_param].unique()), sorted(table[y_param].unique())
    facets = [()] if not rest else sorted(table[rest].drop_duplicates().itertuples(index=False))
    limit = float(np.nanmax(np.abs(table["gain_common"].to_numpy(float)))) or 1.0
    norm = TwoSlopeNorm(vmin=-limit, vcenter=0.0, vmax=limit)
    # One facet: users side by side; several: a row per user, a column per facet.
    panels = [(policy, facet) for policy in policies for facet in facets]
    n_rows, n_cols = (1, len(policies)) if len(facets) == 1 else (len(policies), len(facets))
    with rc_context({**_RC, "axes.grid": False}):
        fig = _figure(1.0 + n_cols * (0.75 * len(xs) + 1.2), 0.6 + n_rows * (0.5 * len(ys) + 1.0))
        grid_axes = fig.subplots(n_rows, n_cols, squeeze=False)
        mesh = None
        for index, (policy, facet) in enumerate(panels):
            ax: Axes = grid_axes[index // n_cols][index % n_cols]
            sub = table[table["policy"] == policy]
            for name, value in zip(rest, facet, strict=True):
                sub = sub[sub[name] == value]
            mesh = _heat_panel(ax, sub, (x_param, y_param), (xs, ys), norm, best_config)
            facet_name = ", ".join(f"{n}={_fmt(v)}" for n, v in zip(rest, facet, strict=True))
            shared = sorted({int(n) for n in sub["n_common"]})
            size = f" (n = {'–'.join(str(n) for n in shared)})" if shared else ""
            ax.set_title(policy + (f" · {facet_name}" if facet_name else "") + size)
        if mesh is not None:
            fig.colorbar(mesh, ax=grid_axes, shrink=0.8, label=f"gain in {measure} over control")
        return _svg(fig, f"Gain in {measure} over the control, by {x_param} and {y_param}", key)


def delta_chart(
    deltas: pd.DataFrame,
    policies: Sequence[str],
    measure: str,
    counts: Mapping[str, tuple[int, int, int]],
    key: str,
) -> Markup:
    """Per-query gains over the control (``delta``), sorted from largest loss to largest gain,
    a panel per user titled with its (improved, degraded, n) from ``counts``."""
    with rc_context(_RC):
        fig = _figure(4.0 * len(policies) + 0.6, 2.6)
        axes = fig.subplots(1, len(policies), sharey=True, squeeze=False)[0]
        for ax, policy in zip(axes, policies, strict=True):
            values = np.sort(deltas.loc[deltas["policy"] == policy, "delta"].to_numpy(float))
            # Two filled step paths instead of a bar per query: 225 bars are 225 SVG paths.
            edges = np.arange(len(values) + 1)
            ax.stairs(np.maximum(values, 0.0), edges, fill=True, color=GAIN, baseline=0.0)
            ax.stairs(np.minimum(values, 0.0), edges, fill=True, color=LOSS, baseline=0.0)
            ax.axhline(0.0, color="#57606a", linewidth=0.8)
            gains, losses, n = counts.get(policy, (0, 0, len(values)))
            ax.set_title(f"{policy}: {gains} better, {losses} worse than control, of {n}")
            ax.set_xlabel("queries, sorted by change")
            ax.set_xticks([])
            ax.grid(axis="x", visible=False)
        axes[0].set_ylabel(f"{measure}: feedback \u2212 control")
        return _svg(fig, f"Per-query gain in {measure} over the control, sorted", key)


def rounds_chart(
    rows: pd.DataFrame,
    configs: Sequence[tuple[str, str]],
    measures: Sequence[str],
    policies: Sequence[str],
    stage: str,
    control: str,
    key: str,
) -> Markup:
    """Each measure over feedback rounds: a solid line for ``stage`` and a dashed one for its
    no-feedback ``control``; round 0 is the provider's order (solid) and the round-0 control
    (dashed). Each round is evaluated under that round's removal of seen documents.

    ``rows``: stage means (config_id, policy, round, stage, measure, mean, ci_low, ci_high);
    ``configs``: (config_id, label) pairs, the first drawn with its confidence band.
    """
    with rc_context(_RC):
        fig = _figure(2.2 * len(measures) + 0.6, 2.0 * len(policies) + 0.8)
        axes = fig.subplots(len(policies), len(measures), sharex=True, squeeze=False)
        for m, measure in enumerate(measures):
            for p, policy in enumerate(policies):
                ax: Axes = axes[p][m]
                sub = rows[(rows["measure"] == measure) & (rows["policy"] == policy)]
                for c, (config_id, label) in enumerate(configs):
                    mine = sub[sub["config_id"] == config_id]
                    start = mine[mine["round"] == 0]
                    line = pd.concat(
                        [start[start["stage"] == "initial"], mine[mine["stage"] == stage]]
                    ).sort_values("round")
                    base = pd.concat(
                        [
                            start[start["stage"] == "control"],
                            mine[(mine["stage"] == control) & (mine["round"] > 0)],
                        ]
                    ).sort_values("round")
                    colour = _CONFIG_COLOURS[c % len(_CONFIG_COLOURS)]
                    width = 2.0 if c == 0 else 1.3
                    ax.plot(
                        line["round"],
                        line["mean"],
                        color=colour,
                        linewidth=width,
                        marker="o",
                        markersize=3.5,
                        label=label,
                    )
                    if c == 0:
                        ax.fill_between(
                            line["round"],
                            line["ci_low"],
                            line["ci_high"],
                            color=colour,
                            alpha=0.12,
                            linewidth=0,
                        )
                    ax.plot(
                        base["round"],
                        base["mean"],
                        color=colour,
                        linewidth=0.9,
                        linestyle="--",
                        alpha=0.8,
                    )
                if p == 0:
                    ax.set_title(measure)
                if m == 0:
                    ax.set_ylabel(policy)
                if p == len(policies) - 1:
                    ax.set_xlabel("round")
                rounds = sorted(sub["round"].unique())
                ax.set_xticks(rounds)
        handles, names = axes[0][0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, names, loc="outside upper center", ncols=min(3, len(handles)))
        title = f"Measures over rounds ({stage}; dashed: {control}, no feedback)"
        return _svg(fig, title, key)


def budget_chart(curve: pd.DataFrame, measure: str, key: str) -> Markup:
    """Gain over the control against the judgment budget (results examined per round), a
    panel per user, a line per setting with its 95% t interval as error bars.

    ``curve``: :func:`~evidence_bench.evaluation.validity.budget_curve` rows with a ``label``
    column naming each setting."""
    users = list(dict.fromkeys(curve["user"]))
    settings = list(dict.fromkeys(curve["label"]))
    depths = sorted({int(d) for d in curve["depth"]})
    with rc_context(_RC):
        fig = _figure(3.4 * len(users) + 0.8, 2.8)
        axes = fig.subplots(1, len(users), sharey=True, squeeze=False)[0]
        for ax, user in zip(axes, users, strict=True):
            ax.axhline(0.0, color="#57606a", linewidth=0.8)
            for c, setting in enumerate(settings):
                mine = curve[(curve["user"] == user) & (curve["label"] == setting)]
                mine = mine.sort_values("depth")
                x = mine["depth"].to_numpy(float)
                y = mine["mean"].to_numpy(float)
                low = np.nan_to_num(y - mine["ci_low"].to_numpy(float))
                high = np.nan_to_num(mine["ci_high"].to_numpy(float) - y)
                colour = _CONFIG_COLOURS[c % len(_CONFIG_COLOURS)]
                ax.errorbar(
                    x, y, yerr=np.vstack([low, high]), color=colour, marker="o", markersize=3.5,
                    linewidth=1.4, capsize=2, label=setting,
                )  # fmt: skip
            ax.set_xscale("log")
            ax.set_xticks(depths, [str(d) for d in depths])
            ax.minorticks_off()
            ax.set_title(user)
            ax.set_xlabel("results examined per round")
        axes[0].set_ylabel(f"gain in {measure} over control")
        handles, names = axes[0].get_legend_handles_labels()
        if handles:
            fig.legend(handles, names, loc="outside upper center", ncols=min(3, len(handles)))
        return _svg(fig, f"Gain in {measure} over the control against the judgment budget", key)


_SOURCE_COLOURS = {
    "config": "#0072B2",
    "seed": "#E69F00",
    "query": "#8c959f",
    "config × seed": "#D55E00",
    "config × query": "#56B4E9",
    "seed × query": "#F0E442",
    "residual": "#d8dee4",
}


def variance_chart(variance: pd.DataFrame, key: str) -> Markup:
    """Each user's and stage's split of the per-query gain's variance (sums of squares over
    the total) as one stacked horizontal bar.

    ``variance``: :func:`~evidence_bench.evaluation.validity.variance_components` rows."""
    parts = variance[variance["source"] != "total"]
    bars = list(dict.fromkeys(zip(parts["user"], parts["stage"], strict=True)))
    sources = list(dict.fromkeys(parts["source"]))
    with rc_context({**_RC, "axes.grid": False}):
        fig = _figure(6.4, 0.36 * len(bars) + 1.1)
        ax = fig.subplots()
        for b, (user, stage) in enumerate(bars):
            left = 0.0
            mine = parts[(parts["user"] == user) & (parts["stage"] == stage)]
            for source in sources:
                share = float(mine.loc[mine["source"] == source, "share"].sum())
                colour = _SOURCE_COLOURS.get(source, "#7f7f7f")
                ax.barh(
                    b, share, left=left, color=colour, height=0.6, label=source if b == 0 else None
                )
                left += share
        ax.set_yticks(range(len(bars)), [f"{u} · {s}" for u, s in bars])
        ax.set_ylim(len(bars) - 0.5, -0.5)
        ax.set_xlim(0.0, 1.0)
        ax.set_xlabel("share of the per-query gain's sum of squares")
        fig.legend(loc="outside upper center", ncols=4)
        return _svg(fig, "Share of the per-query gain's variance by source", key)
