"""The report's page: the context of :func:`evidence_bench.report.render.report_context`
rendered as one self-contained HTML file, written atomically; :func:`render_report` takes
that context from the run's stored analysis (:mod:`evidence_bench.report.stored`) when its
key matches the run, else computes it.

The page holds its CSS and SVG inline and no script; a Content-Security-Policy forbids
loading anything. Web text reaches it only through Jinja2's autoescaping, never ``|safe``,
and URLs are text, not links. This module imports neither pandas nor numpy: a page
rendered from its stored analysis needs Jinja2 alone.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import BytecodeCache, Environment, FileSystemBytecodeCache, UndefinedError

from evidence_bench._atomic import write_atomic
from evidence_bench._forked import both
from evidence_bench.report.environment import report_environment
from evidence_bench.report.numbers import DEFAULT_TRIALS, MAX_EPISODES, p_is, p_value
from evidence_bench.report.numbers import missing as _missing
from evidence_bench.report.numbers import number as _num
from evidence_bench.report.numbers import signed as _signed

if TYPE_CHECKING:
    from evidence_bench.report.tables import Analysis
    from evidence_bench.runs.data import RunData

__all__ = [
    "DEFAULT_TRIALS",
    "MAX_EPISODES",
    "render_page",
    "render_report",
    "report",
    "write_report",
    "write_run_report",
]


def _pct(value: Any) -> str:
    return "–" if _missing(value) else _signed(value, 1) + "%"


def _p_attr(value: Any) -> str:
    """A p-value for a data attribute: enough digits to compare, few enough to stay small."""
    return "" if _missing(value) else f"{float(value):.6g}"


def _count(value: Any) -> str:
    return "–" if _missing(value) else str(int(value))


def _value(value: Any) -> str:
    """A configuration cell: empty where not applicable, numbers without trailing zeros."""
    if _missing(value):
        return ""
    return f"{value:g}" if isinstance(value, float) else str(value)


def _tone(delta: Any, significant: Any = False) -> str:
    """CSS class of a change: its sign, and whether it is significant."""
    if _missing(delta) or abs(float(delta)) < 0.0005:  # shown as 0.000
        return "flat"
    return ("gain" if float(delta) > 0 else "loss") + (" sig" if significant is True else "")


def _ci(low: Any, high: Any) -> str:
    """A confidence interval, ``[+0.012, +0.034]``, or ``–`` where there is none.

    A function rather than a template macro, as a sweep's page shows thousands. Its text
    is digits, signs and brackets, which autoescaping leaves as they are."""
    return "–" if _missing(low) else f"[{_signed(low)}, {_signed(high)}]"


@functools.cache
def _environment() -> Environment:
    env = report_environment(bytecode_cache=_bytecode_cache())
    env.tests["missing"] = _missing
    env.globals["ci"] = _ci
    env.filters.update(
        num=_num,
        signed=_signed,
        pct=_pct,
        pval=p_value,
        p_is=p_is,
        count=_count,
        tone=_tone,
        value=_value,
        p_attr=_p_attr,
    )
    return env


def _bytecode_cache() -> BytecodeCache | None:
    """Jinja2's compiled templates kept between processes (its own per-user directory
    under the temporary one, checked to be the user's alone; each entry is validated
    against its template's source), or None where that directory cannot be had."""
    try:
        return FileSystemBytecodeCache()
    except (OSError, RuntimeError):
        return None


def render_page(context: Mapping[str, Any]) -> str:
    """The report's HTML for ``context``."""
    return _environment().get_template("report.html.j2").render(**context)


def write_report(context: Mapping[str, Any], target: Path) -> Path:
    """Render ``context`` into ``target`` (atomically) and return it."""
    write_atomic(target, render_page(context))  # a reader never sees half a report
    return target


def _run_directory(source: object) -> Path | None:
    """``source`` when it is one run's directory (not a multirun's, not loaded data)."""
    if not isinstance(source, str | os.PathLike):
        return None
    path = Path(source)
    return path.resolve() if (path / "manifest.json").is_file() else None


def report(
    source: Path | RunData | Analysis,
    *,
    out: Path | None = None,
    trials: int = DEFAULT_TRIALS,
    max_episodes: int = MAX_EPISODES,
) -> tuple[Path, str]:
    """:func:`render_report`, and a line that says where its analysis came from: the run's
    stored analysis (its key matched), or computed (and why the stored one was not used)."""
    from evidence_bench.report import stored

    run_dir = _run_directory(source)
    if run_dir is not None:
        key = stored.analysis_key(run_dir, trials=trials, max_episodes=max_episodes)
        context, note = stored.load_context(run_dir, key)
        if context is not None:
            try:  # rendered before anything is written: a context that does not fit the
                # template (a damaged or hand-edited file) is computed anew instead
                return write_report(context, Path(out) if out else run_dir / "report.html"), note
            except (UndefinedError, TypeError, ValueError, KeyError, AttributeError) as exc:
                note = f"analysis computed ({stored.FILE} does not fit the report: {exc})"
    from evidence_bench.report.render import load_source, report_context

    analysis = load_source(source, trials=trials)
    context = report_context(analysis, max_episodes)
    target = write_report(context, Path(out) if out else analysis.data.path / "report.html")
    if run_dir is None:
        return target, "analysis computed"
    return target, note + stored.store_quietly(run_dir, key, context)


def write_run_report(
    run_dir: Path,
    analysis: Analysis,
    *,
    inputs: Callable[[], object] | None = None,
    processes: int = 1,
) -> Path:
    """A new run's report: ``analysis`` (of the run in ``run_dir``, computed with
    :data:`DEFAULT_TRIALS`) rendered into its ``report.html``, and stored with its key
    (:mod:`~evidence_bench.report.stored`) so that ``report RUN_DIR`` renders it without
    redoing it; a context JSON cannot hold exactly is not stored (``report`` computes it).
    ``inputs``: called before the key hashes the run's files (the run writes its Parquet
    files in a thread meanwhile: it waits for them there; the page is not one of them).
    ``processes`` above 1: the page is rendered in a process forked from this one while
    this one stores the analysis."""
    from evidence_bench.report import stored
    from evidence_bench.report.render import report_context

    context = report_context(analysis, MAX_EPISODES, processes=processes)

    def store() -> None:
        if inputs is not None:
            inputs()  # (here: the Parquet files' thread is this process')
        key = stored.analysis_key(run_dir, trials=DEFAULT_TRIALS, max_episodes=MAX_EPISODES)
        stored.store_quietly(run_dir, key, context)

    _, page = both(
        store, lambda: write_report(context, run_dir / "report.html"), processes=processes
    )
    return page


def render_report(
    source: Path | RunData | Analysis,
    *,
    out: Path | None = None,
    trials: int = DEFAULT_TRIALS,
    max_episodes: int = MAX_EPISODES,
) -> Path:
    """Write ``report.html`` into the run (or multirun) directory and return its path.

    ``trials``: at least this many randomization-test trials per comparison (the run's
    Holm families may ask for more). ``max_episodes``: how many of the
    best setting's episodes are detailed (largest losses and gains). A run directory's
    analysis is read from its stored one when that matches the run exactly
    (:mod:`evidence_bench.report.stored`), else computed and stored for the next report.
    """
    return report(source, out=out, trials=trials, max_episodes=max_episodes)[0]
