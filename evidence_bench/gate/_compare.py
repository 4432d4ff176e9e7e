"""Compare a run with its baseline, cell by cell, and render what moved.

A gated cell (a feedback stage × gated measure × gated mode that can still change) is OK
within tolerance, IMPROVED above it (passes; update the baseline on purpose) or FAIL below
it, or when it stands on other queries than the baseline's (its ``n`` or its query ids
changed: a mean over other queries is not the same measurement). Every other cell is
compared and REPORTED when it moved, but never fails. Every measure is higher-is-better.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from evidence_bench.errors import DataError
from evidence_bench.gate._baseline import Baseline, Entry, check_spec_covers
from evidence_bench.gate._run import Cell, RunFacts, describe

__all__ = ["MOVED", "Check", "Role", "compare", "format_moved", "format_table", "summary_line"]

#: How many of a FAIL's queries with the largest drops are listed.
MOVED = 3
_DIGITS = 4
#: Far below any tolerance, far above the float error of a mean of [0, 1] values and its
#: difference from the stored one (~1e-16 each)
_SLACK = 1e-9


class Role(StrEnum):
    GATED = "gated"
    REPORTED = "reported"
    FIXED = "fixed"  # cannot change in frozen mode: decided by the frozen prefix


@dataclass(frozen=True, slots=True)
class Check:
    config_id: str
    policy: str
    round: int
    stage: str
    eval_mode: str
    measure: str
    expected: float
    actual: float
    tolerance: float
    n_expected: int
    n_actual: int
    role: Role = Role.GATED
    #: query ids behind the baseline's mean and not the run's, and the other way round
    lost: tuple[str, ...] = ()
    gained: tuple[str, ...] = ()
    #: (query_id, baseline value, run value), largest drop first, at most MOVED
    moved: tuple[tuple[str, float, float], ...] = ()
    #: the ranking's mean Judged@10 when ``check --min-judged`` asked for it, and whether
    #: ``--strict`` refused the cell for it
    judged: float | None = None
    refused: bool = False

    @property
    def cell(self) -> Cell:
        return (self.config_id, self.policy, self.round, self.stage, self.eval_mode, self.measure)

    @property
    def where(self) -> str:
        """``c01 oracle round 1 rerank residual nDCG@10``: how a line names the cell."""
        return (
            f"{self.config_id} {self.policy} round {self.round} {self.stage} "
            f"{self.eval_mode} {self.measure}"
        )

    @property
    def delta(self) -> float:
        return self.actual - self.expected

    @property
    def other_queries(self) -> bool:
        return self.n_actual != self.n_expected or bool(self.lost or self.gained)

    @property
    def status(self) -> str:
        # a mean exactly half a unit from the stored (rounded) one is within the default
        # tolerance; the subtraction's float error must not make it a FAIL
        bound = self.tolerance + _SLACK
        worse, better = self.delta < -bound, self.delta > bound
        if self.role is not Role.GATED:
            return "REPORTED" if worse or better or self.other_queries else "OK"
        if worse or self.other_queries or self.refused:
            return "FAIL"
        return "IMPROVED" if better else "OK"

    @property
    def note(self) -> str:
        parts = []
        if self.role is Role.REPORTED:
            parts.append("not gated")
        elif self.role is Role.FIXED:
            parts.append("cannot change in frozen mode")
        if self.n_actual != self.n_expected:
            parts.append(f"n {self.n_expected} -> {self.n_actual}")
        if self.lost:
            parts.append(f"lost query {_ids(self.lost)}")
        if self.gained:
            parts.append(f"gained query {_ids(self.gained)}")
        if self.refused:
            parts.append(f"Judged@10 {self.judged:.2f} below --min-judged (--strict)")
        return "; ".join(parts)


def compare(run: RunFacts, baseline: Baseline) -> list[Check]:
    """One :class:`Check` per baseline entry. The baseline must name only cells the run
    has and cover every gated cell of the run, or DataError says what is missing."""
    source = baseline.source
    if baseline.query_set != run.query_set:
        raise DataError(
            f"{source} is for query set {baseline.query_set!r}, the run used {run.query_set!r}"
        )
    check_spec_covers(baseline.gate, run, source)
    absent = [entry for entry in baseline.entries if entry.cell not in run.cells]
    if absent:
        raise DataError(
            f"{source}: checks[{absent[0].index}] ({describe(absent[0].cell)}) is not in the "
            f"run {run.path}{_more(absent)}"
        )
    entries = {entry.cell: entry for entry in baseline.entries}
    gated = [c for c, facts in run.cells.items() if baseline.gate.gates(c) and not facts.fixed]
    uncovered = [cell for cell in gated if cell not in entries]
    if uncovered:
        raise DataError(
            f"{source} does not cover the gated cell ({describe(uncovered[0])}) of the run "
            f"{run.path}{_more(uncovered)}; rewrite the baseline with --update"
        )
    bare = [entries[cell] for cell in gated if entries[cell].queries is None]
    if bare:
        raise DataError(
            f"{source}: checks[{bare[0].index}] ({describe(bare[0].cell)}) is gated but keeps "
            f"no per-query values{_more(bare)}; rewrite the baseline with --update"
        )
    values = run.values(gated)
    checks = []
    for entry in baseline.entries:
        facts = run.cells[entry.cell]
        if entry.cell in values:
            checks.append(_gated(entry, facts.mean, values[entry.cell]))
        else:
            role = Role.FIXED if facts.fixed else Role.REPORTED
            checks.append(
                Check(*entry.cell, entry.mean, facts.mean, entry.tolerance, entry.n, facts.n, role)
            )
    return checks


def _gated(entry: Entry, mean: float, after: Mapping[str, float]) -> Check:
    before = entry.queries or {}
    common = [q for q in before if q in after]
    dropped = [q for q in common if round(after[q], _DIGITS) < before[q]]
    # largest drop first; drops equal to the 4 decimals shown go by query id
    dropped.sort(key=lambda q: (round(after[q] - before[q], _DIGITS), q))
    return Check(
        *entry.cell,
        expected=entry.mean,
        actual=mean,
        tolerance=entry.tolerance,
        n_expected=entry.n,
        n_actual=len(after),
        lost=tuple(q for q in before if q not in after),
        gained=tuple(q for q in after if q not in before),
        moved=tuple((q, before[q], after[q]) for q in dropped[:MOVED]),
    )


def _more(items: Sequence[object]) -> str:
    return f" (and {len(items) - 1} more)" if len(items) > 1 else ""


def _ids(query_ids: Sequence[str], shown: int = 5) -> str:
    text = ", ".join(query_ids[:shown])
    return text + (f" and {len(query_ids) - shown} more" if len(query_ids) > shown else "")


_ORDER = {"FAIL": 0, "IMPROVED": 1, "REPORTED": 2, "OK": 3}


def format_table(checks: Sequence[Check], *, every: bool = False, limit: int | None = None) -> str:
    """The gated checks that FAIL, then those IMPROVED, worst first; ``every``: every check,
    the REPORTED and OK ones after them. ``limit``: at most this many rows, then a line
    saying how many more ``--verbose`` shows."""
    wanted = ("FAIL", "IMPROVED", "REPORTED", "OK") if every else ("FAIL", "IMPROVED")
    shown = sorted(
        (c for c in checks if c.status in wanted), key=lambda c: (_ORDER[c.status], c.delta)
    )
    if not shown:
        return ""
    hidden = shown[limit:] if limit is not None else []
    shown = shown[:limit] if limit is not None else shown
    header = ("status", "config", "policy", "round", "stage", "mode", "measure", "n",
              "expected", "actual", "delta", "note")  # fmt: skip
    rows = [
        (
            c.status,
            c.config_id,
            c.policy,
            str(c.round),
            c.stage,
            c.eval_mode,
            c.measure,
            str(c.n_actual) if c.n_actual == c.n_expected else f"{c.n_expected}->{c.n_actual}",
            f"{c.expected:.4f}",
            f"{c.actual:.4f}",
            f"{c.delta:+.4f}",
            c.note,
        )
        for c in shown
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [_line(header, widths)] + [_line(row, widths) for row in rows]
    if hidden:
        lines.append(f"... and {len(hidden)} more rows (--verbose shows every row)")
    return "\n".join(lines)


def _line(values: Iterable[str], widths: Sequence[int]) -> str:
    return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()


def format_moved(checks: Sequence[Check], *, limit: int | None = None) -> str:
    """For each FAIL (the ``limit`` worst), the queries with the largest drops:
    ``query_id: baseline -> run``."""
    failed = sorted((c for c in checks if c.status == "FAIL"), key=lambda c: c.delta)
    if not failed:
        return ""
    lines = ["queries that moved most, per FAIL (query_id: baseline -> run):"]
    if limit is not None and len(failed) > limit:
        lines[0] = lines[0][:-1] + f", the {limit} worst of {len(failed)} FAILs:"
        failed = failed[:limit]
    for c in failed:
        moved = ", ".join(f"{q}: {b:.4f} -> {a:.4f}" for q, b, a in c.moved) or "none dropped"
        lines.append(f"  {c.where}: {moved}")
    return "\n".join(lines)


def summary_line(checks: Sequence[Check], unbaselined: int = 0) -> str:
    """``N checks: G gated (… OK, … IMPROVED, … FAIL), R reported …``."""
    gated = [c for c in checks if c.role is Role.GATED]
    count = {s: sum(c.status == s for c in gated) for s in ("OK", "IMPROVED", "FAIL")}
    reported = [c for c in checks if c.role is not Role.GATED]
    moved = sum(c.status == "REPORTED" for c in reported)
    fixed = sum(c.role is Role.FIXED for c in reported)
    text = (
        f"{len(checks)} checks: {len(gated)} gated ({count['OK']} OK, {count['IMPROVED']} "
        f"IMPROVED, {count['FAIL']} FAIL), {len(reported)} reported, not gated "
        f"({moved} moved"
    )
    text += f"; {fixed} cannot change in frozen mode)" if fixed else ")"
    if unbaselined:
        text += f"; {unbaselined} cells of the run are not in the baseline (not gated)"
    return text
