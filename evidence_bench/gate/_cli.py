"""``python -m evidence_bench check RUN_DIR --baseline FILE [--update]``.

Exit codes, and nothing else: 0 when no gated cell failed, 1 on any FAIL, 2 when the run
or the baseline cannot be compared (malformed, NaN, not covering the run), or on a bug.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from evidence_bench._argtypes import number_in
from evidence_bench._printable import printable
from evidence_bench.errors import DataError, EvidenceBenchError, RegressionError

if TYPE_CHECKING:
    from evidence_bench.gate._baseline import Baseline
    from evidence_bench.gate._run import RunFacts

__all__ = ["main", "warnings_for"]

#: The feedback stages gated by default (``_baseline.FEEDBACK_STAGES``; tests/test_gate_cli.py
#: checks they agree), here so that ``check --help`` and a usage error answer before the
#: baseline, the run reader and pandas are imported.
DEFAULT_STAGES = ("rerank", "expand")
#: Without --verbose, ``check`` prints at most 60 lines: its verdict and counts, the header
#: and these many rows of FAILs and IMPROVEMENTs, and these many FAILs' moved queries.
_TABLE_ROWS = 32
_MOVED_ROWS = 10
_WARNINGS = 5


def _unjudged_results(run: RunFacts) -> str:
    """Why every score of ``run`` is 0 (live results no judgment names), or "" when some
    results were judged."""
    return str(run.manifest.get("unjudged_results") or "")


def warnings_for(run: RunFacts, baseline: Baseline) -> list[str]:
    """Provenance that differs between the baseline and the run: numbers may move for it;
    and a run whose scores are 0 for want of judged results."""
    notes = []
    if unjudged := _unjudged_results(run):
        notes.append(f"warning: every score of the run is 0: {unjudged}")
    for field in ("cassette_manifest_sha256", "package_version", "experiment"):
        if baseline.provenance.get(field) != run.manifest.get(field):
            notes.append(
                f"warning: {field} differs (baseline {baseline.provenance.get(field)!r}, "
                f"run {run.manifest.get(field)!r})"
            )
    configs = baseline.provenance.get("configs")
    for config_id, label in (configs if isinstance(configs, dict) else {}).items():
        if run.labels.get(config_id) not in (None, label):
            notes.append(
                f"warning: config {config_id} was {label!r} in the baseline, "
                f"is {run.labels[config_id]!r} in the run"
            )
    if run.primary_measure not in baseline.gate.measures:
        notes.append(
            f"warning: the run's eval.primary_measure is {run.primary_measure}, the baseline "
            f"gates {', '.join(baseline.gate.measures)} (--update --measures to change it)"
        )
    return notes


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m evidence_bench check",
        description=(
            "Compare a run's summary with a baseline. Exit 0: no gated cell failed; "
            "1: a gated cell FAILed; 2: the run or baseline cannot be compared."
        ),
    )
    parser.add_argument("run_dir", type=Path, help="a run directory (or its 'latest' link)")
    parser.add_argument("--baseline", type=Path, required=True, help="baseline YAML file")
    parser.add_argument(
        "--update", action="store_true", help="write the baseline from this run instead"
    )
    parser.add_argument(
        "--junit",
        type=Path,
        metavar="FILE",
        help="also write the gated checks as JUnit XML to FILE (one testcase per gated cell)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="list every check (OK and REPORTED too), not only the FAILs and IMPROVEMENTs",
    )
    gate = parser.add_argument_group(
        "what can FAIL (with --update; recorded in the baseline's gate header)"
    )
    judged = parser.add_argument_group("judgments (how much of each gated ranking is judged)")
    judged.add_argument(
        "--min-judged",
        type=number_in(float, 0, 1),
        metavar="SHARE",
        help="warn when a gated cell's Judged@10 (the share of its ranking's top 10 that is "
        "judged, mean over the queries) is below SHARE, 0 to 1",
    )
    judged.add_argument(
        "--strict",
        action="store_true",
        help="with --min-judged: such a cell FAILs instead (exit 1)",
    )
    gate.add_argument(
        "--stages",
        type=_names,
        help=f"feedback stages to gate, comma-separated (default: {','.join(DEFAULT_STAGES)})",
    )
    gate.add_argument(
        "--measures",
        type=_names,
        help="measures to gate, comma-separated (default: the run's eval.primary_measure)",
    )
    gate.add_argument(
        "--modes",
        type=_names,
        help="eval modes to gate, comma-separated (default: every mode the run has)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.strict and args.min_judged is None:
        parser.error("--strict goes with --min-judged SHARE")
    if args.update and args.min_judged is not None:
        parser.error("--min-judged checks a run; it does not go with --update")
    if not args.update and (args.stages, args.measures, args.modes) != (None, None, None):
        parser.error("--stages, --measures and --modes go with --update (the baseline says)")
    try:
        return _update(args) if args.update else _check(args)
    except EvidenceBenchError as exc:
        print(printable(f"evidence_bench: check: {exc}"), file=sys.stderr)
        return 2
    except Exception as exc:  # a bug, not bad input; still not 1, which means FAIL only
        traceback.print_exc()
        print(f"evidence_bench: check: internal error ({exc!r}); please report it", file=sys.stderr)
        return 2


def _update(args: argparse.Namespace) -> int:
    from evidence_bench.gate._baseline import default_spec, parse_spec, write_baseline
    from evidence_bench.gate._run import read_run

    run = read_run(args.run_dir)
    if unjudged := _unjudged_results(run):
        raise DataError(f"{args.run_dir}: not a baseline: {unjudged}")
    spec = default_spec(run)
    spec = parse_spec(
        spec.stages if args.stages is None else args.stages,
        spec.measures if args.measures is None else args.measures,
        spec.modes if args.modes is None else args.modes,
        where="--update",
    )
    baseline = write_baseline(run, args.baseline, spec)
    gated = sum(entry.queries is not None for entry in baseline.entries)
    print(
        f"wrote {len(baseline.entries)} checks ({gated} gated: {', '.join(spec.stages)} × "
        f"{', '.join(spec.measures)} × {', '.join(spec.modes)}) to {args.baseline} "
        f"from {args.run_dir.resolve()}"
    )
    return 0


def _check(args: argparse.Namespace) -> int:
    from evidence_bench.gate._baseline import load_baseline
    from evidence_bench.gate._compare import (
        Role,
        compare,
        format_moved,
        format_table,
        summary_line,
    )
    from evidence_bench.gate._run import read_run

    baseline = load_baseline(args.baseline)
    run = read_run(args.run_dir)
    checks = compare(run, baseline)
    judged_notes: list[str] = []
    if args.min_judged is not None:
        from evidence_bench.gate._judged import apply_min_judged

        checks, judged_notes = apply_min_judged(checks, args.run_dir, args.min_judged, args.strict)
    if args.junit is not None:
        from evidence_bench.gate._junit import write_junit

        write_junit(args.junit, checks, suite=str(args.baseline))
    failed = sum(c.status == "FAIL" for c in checks)
    improved = sum(c.status == "IMPROVED" for c in checks)
    gated = sum(c.role is Role.GATED for c in checks)
    moved = sum(c.status == "REPORTED" for c in checks)
    if failed:
        print(f"FAIL: {failed} of {gated} gated checks worse than {args.baseline}")
    else:
        print(f"PASS: no gated check worse than {args.baseline}")
    print(summary_line(checks, unbaselined=len(run.cells) - len(checks)), flush=True)
    notes = warnings_for(run, baseline) + judged_notes
    shown = notes if args.verbose else notes[:_WARNINGS]
    for note in shown:
        print(note, file=sys.stderr)
    if len(notes) > len(shown):
        print(f"... and {len(notes) - len(shown)} more warnings (--verbose)", file=sys.stderr)
    sys.stderr.flush()
    # the verdict, then what a reader acts on, in at most 60 lines (--verbose: all)
    limit = None if args.verbose else _TABLE_ROWS
    blocks = (
        format_table(checks, every=args.verbose, limit=limit),
        format_moved(checks, limit=None if args.verbose else _MOVED_ROWS),
    )
    for block in blocks:
        if block:
            print(block)
    if moved and not args.verbose:
        print(f"{moved} reported checks moved (not gated): --verbose lists them")
    if improved and not failed:
        print(f"quality improved: update the baseline on purpose with --update {args.baseline}")
    if failed:
        print(
            str(RegressionError(f"{failed} gated checks worse than {args.baseline}")),
            file=sys.stderr,
        )
        return 1
    return 0
