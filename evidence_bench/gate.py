"""The regression gate: compare a run's summary with a committed baseline.

In the manner of Anserini's reproduction configs, a baseline holds the expected mean of
every config × user × round × stage × eval mode × measure, with a tolerance (default: equal
to 4 decimals). Each check is OK (within tolerance), IMPROVED (better beyond it: passes,
and says the baseline should be updated) or FAIL (worse beyond it). Every measure here is
higher-is-better. A baseline entry the run lacks is an error, never a pass.

``python -m evidence_bench check RUN_DIR --baseline baselines/ci.yaml [--update]``
exits 0 when nothing failed, 1 on any FAIL, 2 when the run and baseline do not match.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from evidence_bench.errors import DataError, EvidenceBenchError, RegressionError

__all__ = ["DEFAULT_TOLERANCE", "Check", "compare", "load_baseline", "main", "write_baseline"]

#: Half a unit in the 4th decimal: a mean that rounds to the stored value passes.
DEFAULT_TOLERANCE = 0.00005
KEYS = ("config_id", "policy", "round", "stage", "eval_mode", "measure")


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

    @property
    def delta(self) -> float:
        return self.actual - self.expected

    @property
    def status(self) -> str:
        if self.delta < -self.tolerance:
            return "FAIL"
        if self.delta > self.tolerance:
            return "IMPROVED"
        return "OK"


def _run_facts(run_dir: Path) -> tuple[pd.DataFrame, dict[str, Any], pd.DataFrame]:
    for name in ("summary.csv", "manifest.json", "configs.csv"):
        if not (run_dir / name).is_file():
            raise DataError(f"{run_dir}: not a complete run directory (no {name})")
    summary = pd.read_csv(run_dir / "summary.csv", dtype={"config_id": str, "policy": str})
    manifest = json.loads((run_dir / "manifest.json").read_text())
    configs = pd.read_csv(run_dir / "configs.csv", dtype=str).fillna("")
    return summary, manifest, configs


def load_baseline(path: Path) -> dict[str, Any]:
    """Read and validate a baseline file; errors name the file and the entry at fault."""
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: no such baseline (create it with --update)") from None
    except yaml.YAMLError as exc:
        raise DataError(f"{path}: not valid YAML ({exc.__class__.__name__})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("checks"), list):
        raise DataError(f"{path}: a baseline needs a 'checks' list")
    for index, entry in enumerate(data["checks"]):
        missing = [key for key in (*KEYS, "mean") if key not in entry]
        if missing:
            raise DataError(f"{path}: checks[{index}] lacks {', '.join(missing)}")
    return data


def compare(run_dir: Path, baseline: dict[str, Any], *, source: str = "baseline") -> list[Check]:
    """One :class:`Check` per baseline entry; an entry the run lacks raises DataError."""
    summary, manifest, _configs = _run_facts(run_dir)
    if baseline.get("query_set") != manifest.get("query_set"):
        raise DataError(
            f"{source} is for query set {baseline.get('query_set')!r}, "
            f"the run used {manifest.get('query_set')!r}"
        )
    table = summary.set_index(list(KEYS))["mean"]
    default = float(baseline.get("tolerance", DEFAULT_TOLERANCE))
    checks = []
    for index, entry in enumerate(baseline["checks"]):
        key = (
            str(entry["config_id"]),
            str(entry["policy"]),
            int(entry["round"]),
            str(entry["stage"]),
            str(entry["eval_mode"]),
            str(entry["measure"]),
        )
        if key not in table.index:
            what = ", ".join(f"{k}={v}" for k, v in zip(KEYS, key, strict=True))
            raise DataError(f"{source}: checks[{index}] ({what}) is not in the run {run_dir}")
        checks.append(
            Check(
                *key,
                expected=float(entry["mean"]),
                actual=float(table.loc[key]),
                tolerance=float(entry.get("tolerance", default)),
            )
        )
    return checks


def warnings_for(run_dir: Path, baseline: dict[str, Any]) -> list[str]:
    """Provenance that differs between the baseline and the run: numbers may move for it."""
    _summary, manifest, configs = _run_facts(run_dir)
    notes = []
    for field in ("cassette_manifest_sha256", "package_version", "experiment"):
        if baseline.get(field) != manifest.get(field):
            notes.append(
                f"warning: {field} differs (baseline {baseline.get(field)!r}, "
                f"run {manifest.get(field)!r})"
            )
    labels = dict(zip(configs["config_id"], configs["label"], strict=True))
    for config_id, label in (baseline.get("configs") or {}).items():
        if labels.get(config_id) not in (None, label):
            notes.append(
                f"warning: config {config_id} was {label!r} in the baseline, "
                f"is {labels[config_id]!r} in the run"
            )
    return notes


def write_baseline(run_dir: Path, path: Path, *, tolerance: float = DEFAULT_TOLERANCE) -> int:
    """Write every summary mean of ``run_dir`` as the baseline; returns the entry count."""
    summary, manifest, configs = _run_facts(run_dir)
    data: dict[str, Any] = {
        "query_set": manifest.get("query_set"),
        "experiment": manifest.get("experiment"),
        "cassette_manifest_sha256": manifest.get("cassette_manifest_sha256"),
        "package_version": manifest.get("package_version"),
        "git_commit": manifest.get("git_commit"),
        "tolerance": tolerance,
        "configs": dict(zip(configs["config_id"], configs["label"], strict=True)),
        "checks": [
            {
                "config_id": str(row["config_id"]),
                "policy": str(row["policy"]),
                "round": int(row["round"]),
                "stage": str(row["stage"]),
                "eval_mode": str(row["eval_mode"]),
                "measure": str(row["measure"]),
                "mean": round(float(row["mean"]), 4),
            }
            for row in summary.to_dict("records")
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump(data, sort_keys=False, width=120))
    os.replace(tmp, path)
    return len(data["checks"])


def format_table(checks: Sequence[Check]) -> str:
    """The checks that are not OK: where, expected, actual, delta and status."""
    shown = [c for c in checks if c.status != "OK"]
    if not shown:
        return ""
    header = (
        "status",
        "config",
        "policy",
        "round",
        "stage",
        "mode",
        "measure",
        "expected",
        "actual",
        "delta",
    )
    rows = [
        (
            c.status,
            c.config_id,
            c.policy,
            str(c.round),
            c.stage,
            c.eval_mode,
            c.measure,
            f"{c.expected:.4f}",
            f"{c.actual:.4f}",
            f"{c.delta:+.4f}",
        )
        for c in sorted(shown, key=lambda c: (c.status != "FAIL", c.delta))
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m evidence_bench check",
        description="Compare a run's summary with a baseline; exit 1 on any FAIL.",
    )
    parser.add_argument("run_dir", type=Path, help="a run directory (or its 'latest' link)")
    parser.add_argument("--baseline", type=Path, required=True, help="baseline YAML file")
    parser.add_argument(
        "--update", action="store_true", help="write the baseline from this run instead"
    )
    args = parser.parse_args(argv)
    try:
        if args.update:
            count = write_baseline(args.run_dir, args.baseline)
            print(f"wrote {count} checks to {args.baseline} from {args.run_dir.resolve()}")
            return 0
        baseline = load_baseline(args.baseline)
        checks = compare(args.run_dir, baseline, source=str(args.baseline))
        for note in warnings_for(args.run_dir, baseline):
            print(note, file=sys.stderr)
    except EvidenceBenchError as exc:
        print(f"evidence_bench check: {exc}", file=sys.stderr)
        return 2
    table = format_table(checks)
    if table:
        print(table)
    failed = sum(c.status == "FAIL" for c in checks)
    improved = sum(c.status == "IMPROVED" for c in checks)
    print(
        f"{len(checks)} checks: {len(checks) - failed - improved} OK, {improved} IMPROVED, "
        f"{failed} FAIL"
    )
    if improved and not failed:
        print(f"quality improved: update the baseline on purpose with --update {args.baseline}")
    if failed:
        print(str(RegressionError(f"{failed} checks worse than {args.baseline}")), file=sys.stderr)
        return 1
    return 0
