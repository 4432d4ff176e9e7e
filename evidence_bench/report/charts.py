"""The report's charts as inline SVG: laid out here, drawn by the ``chart.svg.j2`` template.

Each chart is a list of SVG primitives (lines, rects, circles, paths, text) in pixel
coordinates, computed from the data with linear (or, for judgment budgets, logarithmic)
scales, and rendered by one Jinja2 template with autoescaping: every string a chart shows
(configuration labels, user names, measure names) reaches the page escaped, as text, and a
``$`` stays a ``$``. Element and attribute names come from this module, never from data.
Output is deterministic (the same data, the same bytes), holds no script and loads nothing;
the few ids it defines (a hatch pattern, a colour bar's gradient) are prefixed by the chart's
``key``, because several SVGs share one HTML document. Each chart carries its description
as ``aria-label`` and ``<title>``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from jinja2 import Template
from markupsafe import Markup

from evidence_bench.report.environment import report_environment
from evidence_bench.report.numbers import MINUS as _MINUS
from evidence_bench.report.numbers import signed

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
#: ColorBrewer's RdYlGn (Harrower & Brewer 2003), 11 classes, red to green: the heatmap's
#: diverging scale, interpolated linearly between classes as matplotlib's ``RdYlGn`` is.
_RDYLGN = (
    "#a50026", "#d73027", "#f46d43", "#fdae61", "#fee08b", "#ffffbf",
    "#d9ef8b", "#a6d96a", "#66bd63", "#1a9850", "#006837",
)  # fmt: skip
_AXIS = "#8c959f"
_GRID = "#d8dee4"
_TICK = "#424a53"
_ZERO = "#57606a"
_INK = "#1f2328"
_FONT = 11.0
_TITLE = 12.0
#: Average advance of a character of an 11 px sans-serif, to size margins around labels.
_CHAR = 0.6


# --- primitives ---------------------------------------------------------------------------------


def _n(value: float) -> str:
    """A coordinate: two decimals at most, no trailing zeros."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _width(text: str, size: float = _FONT) -> float:
    return len(text) * size * _CHAR


@dataclass
class _Canvas:
    """The primitives of one chart, in drawing order."""

    items: list[dict[str, Any]] = field(default_factory=list)

    def _add(self, el: str, attrs: Mapping[str, Any], text: list[str] | None = None) -> None:
        pairs = [
            (k.replace("_", "-"), _n(v) if isinstance(v, float) else str(v))
            for k, v in attrs.items()
            if v is not None
        ]
        self.items.append({"el": el, "attrs": pairs, "text": text, "x": attrs.get("x")})

    def line(self, x1: float, y1: float, x2: float, y2: float, **attrs: Any) -> None:
        self._add("line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2, **attrs})

    def rect(self, x: float, y: float, w: float, h: float, **attrs: Any) -> None:
        self._add("rect", {"x": x, "y": y, "width": max(w, 0.0), "height": max(h, 0.0), **attrs})

    def circle(self, cx: float, cy: float, r: float, **attrs: Any) -> None:
        self._add("circle", {"cx": cx, "cy": cy, "r": r, **attrs})

    def path(self, d: str, **attrs: Any) -> None:
        self._add("path", {"d": d, **attrs})

    def polyline(self, points: Iterable[tuple[float, float]], **attrs: Any) -> None:
        text = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        self._add("polyline", {"points": text, "fill": "none", **attrs})

    def polygon(self, points: Iterable[tuple[float, float]], **attrs: Any) -> None:
        text = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        self._add("polygon", {"points": text, **attrs})

    def text(self, x: float, y: float, text: str, **attrs: Any) -> None:
        """Text at (x, y) (its baseline); a ``\\n`` starts a line below."""
        self._add("text", {"x": x, "y": y, **attrs}, text.split("\n"))


@cache
def _template() -> Template:
    return report_environment().get_template("chart.svg.j2")


def _svg(
    canvas: _Canvas,
    width: float,
    height: float,
    label: str,
    *,
    hatch: str | None = None,
    gradient: Mapping[str, Any] | None = None,
) -> Markup:
    text = _template().render(
        {
            "label": label,
            "width": _n(math.ceil(width)),
            "height": _n(math.ceil(height)),
            "items": canvas.items,
            "hatch": hatch,
            "gradient": gradient,
        },
    )
    return Markup(text)


# --- scales and axes ----------------------------------------------------------------------------


def _finite(values: Iterable[Any]) -> list[float]:
    out = []
    for v in values:
        try:
            number = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(number):
            out.append(number)
    return out


def _limits(values: Iterable[Any], *, zero: bool = False, pad: float = 0.06) -> tuple[float, float]:
    """The range of the finite values (0 included when ``zero``), padded on both sides."""
    found = _finite(values)
    if zero:
        found.append(0.0)
    if not found:
        return (-1.0, 1.0)
    low, high = min(found), max(found)
    if high - low < 1e-12:
        half = abs(low) * 0.1 or 0.05
        return (low - half, high + half)
    margin = (high - low) * pad
    return (low - margin, high + margin)


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values within [low, high]: steps of 1, 2, 2.5 or 5 × 10^k."""
    span = high - low
    if not (math.isfinite(span) and span > 0):
        return [low]
    raw = span / max(1, count)
    base = 10.0 ** math.floor(math.log10(raw))
    step = next((base * m for m in (1.0, 2.0, 2.5, 5.0, 10.0) if base * m >= raw), base * 10.0)
    first = math.ceil(low / step - 1e-9)
    last = math.floor(high / step + 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def _tick_text(value: float, ticks: Sequence[float]) -> str:
    """A tick's label with as many decimals as the steps need, a true minus sign."""
    step = min((abs(b - a) for a, b in itertools.pairwise(ticks)), default=1.0)
    decimals = max(0, min(6, -math.floor(math.log10(step) + 1e-9))) if step > 0 else 0
    if step > 0 and abs(round(step * 10**decimals) - step * 10**decimals) > 1e-6:
        decimals += 1  # 2.5 × 10^k
    text = f"{value:.{decimals}f}"
    if float(text) == 0:
        text = text.lstrip("-")
    return text.replace("-", _MINUS)


def _fmt(value: Any) -> str:
    """A parameter value as a tick label: ``0.75``, ``1``, or the text of a non-number."""
    return f"{value:g}" if isinstance(value, int | float | np.number) else str(value)


Scale = Callable[[float], float]


def _linear(d0: float, d1: float, r0: float, r1: float) -> Scale:
    ratio = (r1 - r0) / (d1 - d0) if d1 != d0 else 0.0
    return lambda v: r0 + (float(v) - d0) * ratio


@dataclass
class _Panel:
    """One plotting area: its box in pixels and its data ranges."""

    left: float
    top: float
    width: float
    height: float
    x: Scale
    y: Scale

    @property
    def right(self) -> float:
        return self.left + self.width

    @property
    def bottom(self) -> float:
        return self.top + self.height


def _panel(
    left: float,
    top: float,
    width: float,
    height: float,
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    *,
    log_x: bool = False,
) -> _Panel:
    if log_x:
        to = _linear(math.log10(xlim[0]), math.log10(xlim[1]), left, left + width)
        x: Scale = lambda v: to(math.log10(float(v)))  # noqa: E731
    else:
        x = _linear(xlim[0], xlim[1], left, left + width)
    y = _linear(ylim[0], ylim[1], top + height, top)  # up is larger
    return _Panel(left, top, width, height, x, y)


def _x_axis(
    c: _Canvas,
    p: _Panel,
    ticks: Sequence[float],
    labels: Sequence[str] | None = None,
    *,
    grid: bool = True,
    title: str | None = None,
) -> None:
    c.line(p.left, p.bottom, p.right, p.bottom, stroke=_AXIS, stroke_width=0.8)
    names = list(labels) if labels is not None else [_tick_text(t, ticks) for t in ticks]
    for tick, name in zip(ticks, names, strict=True):
        x = p.x(tick)
        if grid:
            c.line(x, p.top, x, p.bottom, stroke=_GRID, stroke_width=0.6)
        c.line(x, p.bottom, x, p.bottom + 3.5, stroke=_AXIS, stroke_width=0.8)
        c.text(x, p.bottom + 15, name, text_anchor="middle", fill=_TICK)
    if title:
        c.text(p.left + p.width / 2, p.bottom + 30, title, text_anchor="middle")


def _y_axis(
    c: _Canvas,
    p: _Panel,
    ticks: Sequence[float],
    labels: Sequence[str] | None = None,
    *,
    grid: bool = True,
    show: bool = True,
    title: str | None = None,
    title_offset: float = 40.0,
) -> None:
    c.line(p.left, p.top, p.left, p.bottom, stroke=_AXIS, stroke_width=0.8)
    names = list(labels) if labels is not None else [_tick_text(t, ticks) for t in ticks]
    for tick, name in zip(ticks, names, strict=True):
        y = p.y(tick)
        if grid:
            c.line(p.left, y, p.right, y, stroke=_GRID, stroke_width=0.6)
        if show:
            c.line(p.left - 3.5, y, p.left, y, stroke=_AXIS, stroke_width=0.8)
            c.text(p.left - 6, y + 4, name, text_anchor="end", fill=_TICK)
    if title:
        x, y = p.left - title_offset, p.top + p.height / 2
        c.text(x, y, title, text_anchor="middle", transform=f"rotate(-90 {_n(x)} {_n(y)})")


def _title(c: _Canvas, p: _Panel, text: str) -> None:
    c.text(p.left + p.width / 2, p.top - 8, text, text_anchor="middle", font_size=_TITLE)


def _legend(
    c: _Canvas, x: float, y: float, entries: Sequence[tuple[str, Callable[[float, float], None]]]
) -> float:
    """A row of (label, marker drawer) entries from (x, y); returns where it ends."""
    for label, draw in entries:
        draw(x, y - 4)
        c.text(x + 22, y, label)
        x += 30 + _width(label)
    return x


def _line_key(c: _Canvas, colour: str, marker: bool = True, **attrs: Any) -> Any:
    def draw(x: float, y: float) -> None:
        c.line(x, y, x + 16, y, stroke=colour, stroke_width=1.6, **attrs)
        if marker:
            c.circle(x + 8, y, 3.0, fill=colour)

    return draw


def _dot_key(c: _Canvas, colour: str, filled: bool) -> Any:
    def draw(x: float, y: float) -> None:
        c.circle(x + 8, y, 3.5, fill=colour if filled else "white", stroke=colour)

    return draw


def _box_key(c: _Canvas, colour: str) -> Any:
    def draw(x: float, y: float) -> None:
        c.rect(x + 2, y - 5, 12, 10, fill=colour)

    return draw


def _values(frame: pd.DataFrame, column: str) -> np.ndarray:
    return frame[column].to_numpy(dtype=float)


# --- the charts ---------------------------------------------------------------------------------


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
    labels = [str(v) for v in dict.fromkeys(rows["label"])]
    n_users = max(1, len(policies))
    row_height = max(16.0, 11.0 * n_users + 6.0)
    left = 12.0 + max((_width(v) for v in labels), default=0.0)
    top, width, gap = 52.0, 250.0, 24.0
    height = row_height * max(1, len(labels))
    wanted = rows[rows["stage"].isin(list(stages))]
    xlim = _limits(
        [*wanted["gain"], *wanted["gain_ci_low"], *wanted["gain_ci_high"]], zero=True, pad=0.05
    )
    ticks = [t for t in _ticks(*xlim) if xlim[0] <= t <= xlim[1]]
    ylim = (len(labels) - 0.5, -0.5)  # the first configuration on top
    c = _Canvas()
    step = 0.7 / n_users
    index = {label: i for i, label in enumerate(labels)}
    for s, stage in enumerate(stages):
        p = _panel(left + s * (width + gap), top, width, height, xlim, ylim)
        _x_axis(c, p, ticks, title=f"gain in {measure} over the control")
        _y_axis(c, p, [float(i) for i in range(len(labels))], labels, grid=False, show=s == 0)
        c.line(p.x(0.0), p.top, p.x(0.0), p.bottom, stroke=_ZERO, stroke_width=0.9)
        _title(c, p, f"{stage} \u2212 {controls.get(stage, 'control')}")
        for u, policy in enumerate(policies):
            colour = USER_COLOURS[u % len(USER_COLOURS)]
            sub = rows[(rows["stage"] == stage) & (rows["policy"] == policy)]
            for label, gain, low, high, sig in zip(
                sub["label"], _values(sub, "gain"), _values(sub, "gain_ci_low"),
                _values(sub, "gain_ci_high"), sub["significant"].to_numpy(dtype=bool),
                strict=True,
            ):  # fmt: skip
                y = p.y(index[str(label)] + (u - (n_users - 1) / 2) * step)
                if math.isfinite(low) and math.isfinite(high):
                    c.line(p.x(low), y, p.x(high), y, stroke=colour, stroke_width=1.2)
                    for end in (low, high):
                        c.line(p.x(end), y - 2.5, p.x(end), y + 2.5, stroke=colour)
                if math.isfinite(gain):
                    fill = colour if sig else "white"
                    c.circle(p.x(gain), y, 3.5, fill=fill, stroke=colour, stroke_width=1.2)
    entries = [
        (str(policy), _line_key(c, USER_COLOURS[u % len(USER_COLOURS)]))
        for u, policy in enumerate(policies)
    ]
    entries += [("significant", _dot_key(c, _ZERO, True))]
    entries += [("not significant", _dot_key(c, _ZERO, False))]
    end = _legend(c, left, 16.0, entries)
    total = max(left + len(stages) * (width + gap), end) + 8
    label = f"Gain in {measure} over the control per configuration, 95% CI"
    return _svg(c, total, top + height + 40, label)


def _colour(value: float, limit: float) -> str:
    """RdYlGn at ``value`` on a scale centred at 0 from −limit to +limit (a two-slope norm)."""
    at = min(1.0, max(0.0, 0.5 + 0.5 * value / limit)) * (len(_RDYLGN) - 1)
    i = min(int(at), len(_RDYLGN) - 2)
    frac = at - i
    a, b = _RDYLGN[i], _RDYLGN[i + 1]
    mixed = [
        round(int(a[k : k + 2], 16) * (1 - frac) + int(b[k : k + 2], 16) * frac) for k in (1, 3, 5)
    ]
    return "#" + "".join(f"{v:02x}" for v in mixed)


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
    # One facet: users side by side; several: a row per user, a column per facet.
    panels = [(policy, facet) for policy in policies for facet in facets]
    n_cols = len(policies) if len(facets) == 1 else len(facets)
    cell_w, cell_h = 58.0, 36.0
    y_names = [_fmt(v) for v in ys]
    left = 30.0 + max((_width(v) for v in y_names), default=0.0)
    top, col_gap, row_gap = 30.0, 34.0 + left, 62.0
    width, height = cell_w * len(xs), cell_h * len(ys)
    hatch = f"{key}-hatch"
    c = _Canvas()
    aliased = False
    for number, (policy, facet) in enumerate(panels):
        row, col = divmod(number, n_cols)
        p = _panel(
            left + col * (width + col_gap),
            top + row * (height + row_gap),
            width,
            height,
            (-0.5, len(xs) - 0.5),
            (-0.5, len(ys) - 0.5),
        )
        sub = table[table["policy"] == policy]
        for name, value in zip(rest, facet, strict=True):
            sub = sub[sub[name] == value]
        c.rect(p.left, p.top, p.width, p.height, fill="#f6f8fa")
        for record in sub.to_dict("records"):
            i, j = ys.index(record[y_param]), xs.index(record[x_param])
            delta = float(record["gain_common"])
            x0, y0 = p.x(j - 0.5), p.y(i + 0.5)
            if math.isfinite(delta):
                c.rect(x0, y0, cell_w, cell_h, fill=_colour(delta, limit), stroke="white",
                       stroke_width=1.5)  # fmt: skip
            alias_of = record.get("alias_of") or ""
            if alias_of:  # the same results as another config: shown once more, hatched
                aliased = True
                c.rect(x0, y0, cell_w, cell_h, fill=f"url(#{hatch})")
            if record["config_id"] == best_config:
                c.rect(x0 + 3, y0 + 3, cell_w - 6, cell_h - 6, fill="none", stroke=_INK,
                       stroke_width=2.5)  # fmt: skip
            if not math.isfinite(delta):
                continue
            text = signed(delta) + ("*" if record["significant"] else "")
            if alias_of:
                text += f"\n= {alias_of}"
            dark = abs(delta) > 0.6 * limit
            lines = 1 + bool(alias_of)
            c.text(p.x(j), p.y(i) + 4 - 6.5 * (lines - 1), text, text_anchor="middle",
                   font_size=10, fill="white" if dark else _INK)  # fmt: skip
        _x_axis(c, p, [float(j) for j in range(len(xs))], [_fmt(v) for v in xs], grid=False,
                title=x_param)  # fmt: skip
        _y_axis(c, p, [float(i) for i in range(len(ys))], y_names, grid=False, title=y_param,
                title_offset=left - 10)  # fmt: skip
        facet_name = ", ".join(f"{n}={_fmt(v)}" for n, v in zip(rest, facet, strict=True))
        shared = sorted({int(n) for n in sub["n_common"]})
        size = f" (n = {'–'.join(str(n) for n in shared)})" if shared else ""
        _title(c, p, str(policy) + (f" · {facet_name}" if facet_name else "") + size)
    n_rows = math.ceil(len(panels) / n_cols)
    right = left + n_cols * (width + col_gap) - col_gap
    # The colour bar: the scale from −limit (red) through 0 to +limit (green).
    bar_x, bar_top = right + 28, top
    bar_h = max(120.0, n_rows * (height + row_gap) - row_gap)
    stops = [(f"{i / 10:g}", _colour(-limit + 2 * limit * i / 10, limit)) for i in range(11)]
    gradient = {"id": f"{key}-scale", "stops": stops}
    c.rect(bar_x, bar_top, 14, bar_h, fill=f"url(#{key}-scale)")
    bar = _panel(bar_x, bar_top, 14, bar_h, (0.0, 1.0), (-limit, limit))
    bar_ticks = [t for t in _ticks(-limit, limit, 4) if -limit <= t <= limit]
    for tick in bar_ticks:
        y = bar.y(tick)
        c.line(bar_x + 14, y, bar_x + 17.5, y, stroke=_AXIS, stroke_width=0.8)
        c.text(bar_x + 20, y + 4, _tick_text(tick, bar_ticks), fill=_TICK)
    label_x, label_y = bar_x + 70, bar_top + bar_h / 2
    c.text(label_x, label_y, f"gain in {measure} over control", text_anchor="middle",
           transform=f"rotate(-90 {_n(label_x)} {_n(label_y)})")  # fmt: skip
    total_h = top + n_rows * (height + row_gap) - row_gap + 40
    label = f"Gain in {measure} over the control, by {x_param} and {y_param}"
    return _svg(
        c, label_x + 12, total_h, label, hatch=hatch if aliased else None, gradient=gradient
    )


def _stairs(p: _Panel, values: np.ndarray) -> str:
    """A filled step path of ``values`` (one step per query) down to 0: one path, not a bar
    per query."""
    zero = p.y(0.0)
    parts = [f"M{_n(p.x(0.0))},{_n(zero)}"]
    for i, v in enumerate(values):
        parts.append(f"V{_n(p.y(float(v)))}H{_n(p.x(i + 1.0))}")
    parts.append(f"V{_n(zero)}Z")
    return "".join(parts)


def delta_chart(
    deltas: pd.DataFrame,
    policies: Sequence[str],
    measure: str,
    counts: Mapping[str, tuple[int, int, int]],
    key: str,
) -> Markup:
    """Per-query gains over the control (``delta``), sorted from largest loss to largest gain,
    a panel per user titled with its (improved, degraded, n) from ``counts``."""
    per_user = {
        policy: np.sort(deltas.loc[deltas["policy"] == policy, "delta"].to_numpy(float))
        for policy in policies
    }
    ylim = _limits([v for values in per_user.values() for v in values], zero=True, pad=0.05)
    ticks = [t for t in _ticks(*ylim) if ylim[0] <= t <= ylim[1]]
    left, top, width, height, gap = 62.0, 28.0, 280.0, 150.0, 36.0
    c = _Canvas()
    for u, policy in enumerate(policies):
        values = per_user[policy]
        p = _panel(left + u * (width + gap), top, width, height, (0.0, max(1, len(values))), ylim)
        _y_axis(c, p, ticks, show=u == 0,
                title=f"{measure}: feedback \u2212 control" if u == 0 else None,
                title_offset=48.0)  # fmt: skip
        c.line(p.left, p.bottom, p.right, p.bottom, stroke=_AXIS, stroke_width=0.8)
        c.path(_stairs(p, np.maximum(values, 0.0)), fill=GAIN)
        c.path(_stairs(p, np.minimum(values, 0.0)), fill=LOSS)
        c.line(p.left, p.y(0.0), p.right, p.y(0.0), stroke=_ZERO, stroke_width=0.8)
        gains, losses, n = counts.get(policy, (0, 0, len(values)))
        _title(c, p, f"{policy}: {gains} better, {losses} worse than control, of {n}")
        c.text(p.left + p.width / 2, p.bottom + 18, "queries, sorted by change",
               text_anchor="middle")  # fmt: skip
    total = left + len(policies) * (width + gap) - gap + 12
    return _svg(
        c, total, top + height + 30, f"Per-query gain in {measure} over the control, sorted"
    )


class _Point(NamedTuple):
    """One row of the rounds chart's means."""

    config_id: Any
    round: int
    stage: Any
    mean: float
    ci_low: float
    ci_high: float


def _by_round(point: _Point) -> int:
    return point.round


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
    left, top, width, height, col_gap, row_gap = 74.0, 56.0, 300.0, 170.0, 56.0, 34.0
    # at most three measures side by side (then the next band below), so a panel keeps a
    # third of the page's width rather than a fifth
    cols = max(1, min(3, len(measures)))
    band_gap = 26.0
    c = _Canvas()
    all_rounds = sorted(int(r) for r in pd.unique(rows["round"]))
    xlim = (min(all_rounds, default=0) - 0.25, max(all_rounds, default=1) + 0.25)
    # each (measure, policy)'s rows as plain tuples, in row order
    columns = ("measure", "policy", "config_id", "round", "stage", "mean", "ci_low", "ci_high")
    panels: dict[tuple[Any, Any], list[_Point]] = {}
    for m, u, config_id, r, st, mean, low, high in zip(
        *(rows[name].tolist() for name in columns), strict=True
    ):
        point = _Point(config_id, int(r), st, float(mean), float(low), float(high))
        panels.setdefault((m, u), []).append(point)
    for m, measure in enumerate(measures):
        for u, policy in enumerate(policies):
            sub = panels.get((measure, policy), [])
            lines = []
            for config_id, _ in configs:
                mine = [r for r in sub if r.config_id == config_id]
                start = [r for r in mine if r.round == 0]
                # sorted by round, stably: the round-0 reference before the stage's rounds
                line = sorted(
                    [
                        *(r for r in start if r.stage == "initial"),
                        *(r for r in mine if r.stage == stage),
                    ],
                    key=_by_round,
                )
                base = sorted(
                    [
                        *(r for r in start if r.stage == "control"),
                        *(r for r in mine if r.stage == control and r.round > 0),
                    ],
                    key=_by_round,
                )
                lines.append((line, base))
            shown = (
                [*(r.ci_low for r in lines[0][0]), *(r.ci_high for r in lines[0][0])]
                if lines
                else []
            )
            shown += [r.mean for line, base in lines for r in (*line, *base)]
            ylim = _limits(shown)
            ticks = [t for t in _ticks(*ylim, 4) if ylim[0] <= t <= ylim[1]]
            strip, col = divmod(m, cols)
            row = strip * len(policies) + u
            p = _panel(left + col * (width + col_gap), top + row * (height + row_gap)
                       + strip * band_gap, width, height, xlim, ylim)  # fmt: skip
            rounds = sorted({r.round for r in sub})
            last = u == len(policies) - 1
            _x_axis(c, p, [float(r) for r in rounds], [str(r) for r in rounds],
                    title="round" if last else None)  # fmt: skip
            _y_axis(c, p, ticks, title=str(policy) if col == 0 else None, title_offset=50.0)
            if u == 0:
                _title(c, p, measure)
            for k, (line, base) in enumerate(lines):
                colour = _CONFIG_COLOURS[k % len(_CONFIG_COLOURS)]
                if k == 0 and len(line):
                    band = [(p.x(float(r.round)), p.y(r.ci_high)) for r in line
                            if math.isfinite(r.ci_high)]  # fmt: skip
                    band += [(p.x(float(r.round)), p.y(r.ci_low)) for r in reversed(line)
                             if math.isfinite(r.ci_low)]  # fmt: skip
                    if len(band) > 2:
                        c.polygon(band, fill=colour, fill_opacity=0.12)
                points = [(p.x(float(r.round)), p.y(r.mean)) for r in line]
                c.polyline(points, stroke=colour, stroke_width=2.0 if k == 0 else 1.3)
                for x, y in points:
                    c.circle(x, y, 2.5, fill=colour)
                dashed = [(p.x(float(r.round)), p.y(r.mean)) for r in base]
                c.polyline(dashed, stroke=colour, stroke_width=0.9, stroke_dasharray="4 3",
                           stroke_opacity=0.8)  # fmt: skip
    entries = [
        (label, _line_key(c, _CONFIG_COLOURS[k % len(_CONFIG_COLOURS)]))
        for k, (_, label) in enumerate(configs)
    ]
    dashed = _line_key(c, _CONFIG_COLOURS[0], marker=False, stroke_dasharray="4 3")
    entries.append((f"dashed: {control}, the same ranker without feedback", dashed))
    end = _legend(c, left, 16.0, entries[:2])
    if len(entries) > 2:
        end = max(end, _legend(c, left, 32.0, entries[2:]))
    bands = -(-len(measures) // cols)
    total_w = max(left + cols * (width + col_gap) - col_gap + 12, end)
    total_h = (
        top + bands * len(policies) * (height + row_gap) - row_gap + (bands - 1) * band_gap + 40
    )
    title = f"Measures over rounds ({stage}; dashed: {control}, no feedback)"
    return _svg(c, total_w, total_h, title)


def budget_chart(curve: pd.DataFrame, measure: str, key: str) -> Markup:
    """Gain over the control against the judgment budget (results examined per round), a
    panel per user, a line per setting with its 95% t interval as error bars.

    ``curve``: :func:`~evidence_bench.evaluation.validity.budget_curve` rows with a ``label``
    column naming each setting."""
    users = list(dict.fromkeys(curve["user"]))
    settings = list(dict.fromkeys(curve["label"]))
    depths = sorted({int(d) for d in curve["depth"]})
    low_d, high_d = (min(depths), max(depths)) if depths else (1, 10)
    xlim = (low_d / 1.25, high_d * 1.25)
    ylim = _limits([*curve["mean"], *curve["ci_low"], *curve["ci_high"]], zero=True)
    ticks = [t for t in _ticks(*ylim) if ylim[0] <= t <= ylim[1]]
    left, top, width, height, gap = 66.0, 52.0, 220.0, 150.0, 30.0
    c = _Canvas()
    for u, user in enumerate(users):
        p = _panel(left + u * (width + gap), top, width, height, xlim, ylim, log_x=True)
        _x_axis(c, p, [float(d) for d in depths], [str(d) for d in depths],
                title="results examined per round")  # fmt: skip
        _y_axis(c, p, ticks, show=u == 0,
                title=f"gain in {measure} over control" if u == 0 else None,
                title_offset=52.0)  # fmt: skip
        c.line(p.left, p.y(0.0), p.right, p.y(0.0), stroke=_ZERO, stroke_width=0.8)
        _title(c, p, str(user))
        for k, setting in enumerate(settings):
            mine = curve[(curve["user"] == user) & (curve["label"] == setting)]
            mine = mine.sort_values("depth")
            colour = _CONFIG_COLOURS[k % len(_CONFIG_COLOURS)]
            xs, ys = _values(mine, "depth"), _values(mine, "mean")
            lows, highs = _values(mine, "ci_low"), _values(mine, "ci_high")
            points = [(p.x(x), p.y(y)) for x, y in zip(xs, ys, strict=True) if math.isfinite(y)]
            c.polyline(points, stroke=colour, stroke_width=1.4)
            for x, y, lo, hi in zip(xs, ys, lows, highs, strict=True):
                if not math.isfinite(y):
                    continue
                lo, hi = (lo if math.isfinite(lo) else y), (hi if math.isfinite(hi) else y)
                c.line(p.x(x), p.y(lo), p.x(x), p.y(hi), stroke=colour, stroke_width=1.2)
                for end in (lo, hi):
                    c.line(p.x(x) - 2.5, p.y(end), p.x(x) + 2.5, p.y(end), stroke=colour)
                c.circle(p.x(x), p.y(y), 3.0, fill=colour)
    entries = [
        (str(s), _line_key(c, _CONFIG_COLOURS[k % len(_CONFIG_COLOURS)]))
        for k, s in enumerate(settings)
    ]
    end = _legend(c, left, 16.0, entries[:3])
    if len(entries) > 3:
        end = max(end, _legend(c, left, 32.0, entries[3:]))
    total = max(left + len(users) * (width + gap) - gap + 12, end)
    label = f"Gain in {measure} over the control against the judgment budget"
    return _svg(c, total, top + height + 40, label)


_SOURCE_COLOURS = {
    "config": "#0072B2", "seed": "#E69F00", "query": "#8c959f", "config × seed": "#D55E00",
    "config × query": "#56B4E9", "seed × query": "#F0E442", "residual": "#d8dee4",
}  # fmt: skip


def variance_chart(variance: pd.DataFrame, key: str) -> Markup:
    """Each user's and stage's split of the per-query gain's variance (sums of squares over
    the total) as one stacked horizontal bar.

    ``variance``: :func:`~evidence_bench.evaluation.validity.variance_components` rows."""
    parts = variance[variance["source"] != "total"]
    bars = list(dict.fromkeys(zip(parts["user"], parts["stage"], strict=True)))
    sources = list(dict.fromkeys(parts["source"]))
    names = [f"{u} · {s}" for u, s in bars]
    left = 12.0 + max((_width(n) for n in names), default=0.0)
    legend_rows = math.ceil(len(sources) / 4)
    top, width, bar_h = 14.0 + 18.0 * legend_rows, 420.0, 26.0
    height = bar_h * max(1, len(bars))
    p = _panel(left, top, width, height, (0.0, 1.0), (len(bars) - 0.5, -0.5))
    c = _Canvas()
    ticks = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    _x_axis(c, p, ticks, grid=False, title="share of the per-query gain's sum of squares")
    _y_axis(c, p, [float(b) for b in range(len(bars))], names, grid=False)
    for b, (user, stage) in enumerate(bars):
        start = 0.0
        mine = parts[(parts["user"] == user) & (parts["stage"] == stage)]
        for source in sources:
            share = float(mine.loc[mine["source"] == source, "share"].sum())
            colour = _SOURCE_COLOURS.get(source, "#7f7f7f")
            if math.isfinite(share) and share > 0:
                c.rect(p.x(start), p.y(b - 0.3), p.x(start + share) - p.x(start), 0.6 * bar_h,
                       fill=colour)  # fmt: skip
                start += share
    for row in range(legend_rows):
        chunk = sources[row * 4 : row * 4 + 4]
        _legend(c, left, 14.0 + 18.0 * row, [(s, _box_key(c, _SOURCE_COLOURS.get(s, "#7f7f7f")))
                                             for s in chunk])  # fmt: skip
    return _svg(
        c, left + width + 16, top + height + 40, "Share of the per-query gain's variance by source"
    )
