"""``report``: re-render a run's (or a multirun's) report.html from its files."""

from __future__ import annotations

import sys
from pathlib import Path

from evidence_bench.commands._common import asks_help, fail

__all__ = ["report_command"]


def report_command(argv: list[str]) -> None:
    usage = "usage: python -m evidence_bench report RUN_DIR"
    asks_help(argv, usage)
    if len(argv) != 1:
        fail(usage, 2)
    target = Path(argv[0])
    if not target.is_dir():
        fail(f"report: {target} is not a directory", 2)
    from evidence_bench.report.page import report

    path, note = report(target)  # a run directory, or a multirun of them
    print(f"report: {note}", file=sys.stderr)  # whether the stored analysis was used, or why not
    for unchecked in _unchecked(target):
        print(f"report: note: {unchecked}", file=sys.stderr)
    print(f"report: {path}")


def _unchecked(target: Path) -> list[str]:
    """What :func:`~evidence_bench.runs.checksums.check_tables` says of each run in
    ``target`` written before runs kept their tables' checksums."""
    import json

    from evidence_bench.runs.checksums import check_tables

    notes = []
    for manifest in sorted([target / "manifest.json", *target.glob("*/manifest.json")]):
        try:
            data = json.loads(manifest.read_text("utf-8"))
        except (OSError, ValueError):
            continue  # (the report read it, or said why not)
        if isinstance(data, dict) and "tables" not in data:
            notes.append(check_tables(manifest.parent, data))
    return notes
