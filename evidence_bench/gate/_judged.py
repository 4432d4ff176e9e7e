"""``check --min-judged SHARE [--strict]``: a gated cell whose ranking is mostly unjudged.

A cell's ``Judged@10`` is the mean share of its ranking's top 10 that the run's qrels judge
(:func:`evidence_bench.runs.data.run_judged`). Below ``SHARE`` it is a warning naming the
cell; with ``--strict`` the cell FAILs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

from evidence_bench.errors import DataError
from evidence_bench.gate._compare import Check, Role
from evidence_bench.runs.data import run_judged

__all__ = ["apply_min_judged"]


def apply_min_judged(
    checks: Sequence[Check], run_dir: Path, share: float, strict: bool
) -> tuple[list[Check], list[str]]:
    """The checks with their Judged@10 (gated ones), refused below ``share`` when
    ``strict``; and a warning line for each gated cell below it."""
    try:
        cells = run_judged(run_dir)
    except DataError as exc:
        raise DataError(f"--min-judged needs the run's rankings: {exc}") from exc
    out: list[Check] = []
    notes: list[str] = []
    for check in checks:
        if check.role is not Role.GATED:
            out.append(check)
            continue
        judged = cells.get((check.config_id, check.policy, check.round, check.stage))
        if judged is None:
            raise DataError(
                f"{run_dir / 'runs.parquet'}: no ranking for the gated cell {check.config_id} "
                f"{check.policy} round {check.round} {check.stage}"
            )
        low = judged < share
        if low:
            verdict = "refused (--strict)" if strict else "its gain may be an artefact"
            notes.append(f"warning: {check.where}: Judged@10 {judged:.2f} < {share:g}; {verdict}")
        out.append(dataclasses.replace(check, judged=judged, refused=low and strict))
    return out, notes
