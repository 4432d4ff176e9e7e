"""``export``: a run's tables as CSV, or its TREC runs and qrels."""

from __future__ import annotations

import argparse
from pathlib import Path

from evidence_bench.commands._common import fail

__all__ = ["EXPORT_FORMATS", "export_command", "export_parser"]


#: ``export``'s formats: :class:`evidence_bench.experiment.export.ExportFormat`'s values
#: (tests/test_main.py checks they agree), here so that ``export --help`` and a bad
#: argument answer before the exporter and its dependencies are imported.
EXPORT_FORMATS = ("csv", "trec")


def export_parser() -> argparse.ArgumentParser:
    """``python -m evidence_bench export``'s options (the CLI reference shows them)."""
    parser = argparse.ArgumentParser(
        prog="python -m evidence_bench export",
        description=(
            "Write a run's results in an interchange format: its CSVs (per_query.csv, "
            "summary.csv, feedback.csv, episodes.jsonl) or its TREC runs and qrels (trec/)."
        ),
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory to export")
    parser.add_argument(
        "--format",
        required=True,
        choices=EXPORT_FORMATS,
        help="csv: the tables as CSV, as runs wrote them before Parquet; trec: trec/qrels.txt "
        "and one gzipped TREC run per config, policy, round and stage",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        type=Path,
        help="where to write (default: RUN_DIR itself); created if missing",
    )
    return parser


def export_command(argv: list[str]) -> None:
    args = export_parser().parse_args(argv)
    target = Path(args.run_dir)
    if not target.is_dir():
        fail(f"export: {target} is not a directory", 2)
    from evidence_bench.errors import EvidenceBenchError
    from evidence_bench.experiment.export import export_run, written

    try:
        paths = export_run(target, args.format, args.out)
    except EvidenceBenchError as exc:
        fail(f"export: {exc}")
    print(written(paths), end="")
