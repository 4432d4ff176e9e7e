"""The regression gate: the committed CI baseline passes, a degraded ranker fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pandas as pd
import pytest
import yaml

from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.gate import main
from tests.conftest import exported

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "baselines" / "ci.yaml"


def run_ci(tmp_path: Path, *extra: str) -> Path:
    cfg, text = compose(
        [
            "+experiment=ci",
            f"runs_dir={tmp_path / 'runs'}",
            "progress=false",
            "report=false",
            *extra,
        ]
    )
    return exported(perform_run(cfg, text).path, "csv")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evidence_bench", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gate's run, made as ``make gate`` makes it: ``python -m evidence_bench run
    +experiment=ci`` in a fresh process (``make test`` runs these tests instead of the gate)."""
    runs = tmp_path_factory.mktemp("ci") / "runs"
    done = cli("run", "+experiment=ci", f"runs_dir={runs}", "progress=false", "report=false")
    assert done.returncode == 0, done.stderr
    return exported((runs / "ci" / "latest").resolve(), "csv")


def gated_entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [entry for entry in data["checks"] if "queries" in entry]


def test_the_committed_baseline_passes(ci_run: Path) -> None:
    """The regression gate itself: ``python -m evidence_bench check RUN --baseline
    baselines/ci.yaml``, as ``make gate`` and CI run it."""
    done = cli("check", str(ci_run), "--baseline", str(BASELINE))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 FAIL" in done.stdout and "0 IMPROVED" in done.stdout and "0 moved" in done.stdout


def test_a_degraded_ranker_fails_on_gated_cells_naming_the_queries_that_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    degraded = run_ci(tmp_path, "ranker=provider_order")
    junit = tmp_path / "gate.xml"
    assert main([str(degraded), "--baseline", str(BASELINE), "--junit", str(junit)]) == 1
    suite = ET.parse(junit).getroot()[0]
    assert int(suite.get("failures", "0")) > 0 and len(suite) == int(suite.get("tests", "0"))
    out, _err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("FAIL: ") and len(lines) <= 60  # the verdict, then the rest
    assert not any(line.startswith(("REPORTED", "OK ")) for line in lines)
    assert main([str(degraded), "--baseline", str(BASELINE), "--verbose"]) == 1
    out, err = capsys.readouterr()
    lines = out.splitlines()[2:]
    assert lines[0].split() == ["status", "config", "policy", "round", "stage", "mode", "measure",
                                "n", "expected", "actual", "delta", "note"]  # fmt: skip
    rows = [line.split() for line in lines[1:] if line.startswith(("FAIL", "IMPROVED", "REPORTED"))]
    fails = [row for row in rows if row[0] == "FAIL"]
    assert fails and fails == rows[: len(fails)]  # FAILs come first
    for _status, config, policy, _round, stage, mode, measure, _n, expected, actual, delta in fails:
        assert config == "c00" and stage in ("rerank", "expand") and measure == "nDCG@10"
        assert policy in ("oracle", "noisy") and mode in ("full", "residual", "frozen")
        assert float(delta) == pytest.approx(float(actual) - float(expected), abs=2e-4)
        assert float(delta) < 0
    # controls and other measures moved too (provider order is the initial ranking), but
    # they are reported, never FAIL
    reported = [row for row in rows if row[0] == "REPORTED"]
    assert {row[4] for row in reported} >= {"rerank", "control", "shuffled"}
    assert {row[6] for row in reported} >= {"AP", "RR"}
    frozen_fixed = ["cannot", "change", "in", "frozen", "mode"]
    assert all(row[-2:] == ["not", "gated"] or row[-5:] == frozen_fixed for row in reported)
    # each FAIL names up to three queries that dropped, with the run's own per-query value
    per_query = pd.read_csv(degraded / "per_query.csv", dtype={"query_id": str})
    columns = ("policy", "round", "stage", "eval_mode", "measure", "query_id")
    start = lines.index("queries that moved most, per FAIL (query_id: baseline -> run):")
    listed = lines[start + 1 : start + 1 + len(fails)]
    assert len(listed) == len(fails)
    for line in listed:
        where, _, moved = line.strip().partition(": ")
        _config, policy, _word, round_, stage, mode, measure = where.split()
        pairs = [item.split(": ") for item in moved.split(", ")]
        assert 1 <= len(pairs) <= 3
        for query_id, change in pairs:
            before, after = (float(v) for v in change.split(" -> "))
            assert after < before
            cell = (policy, int(round_), stage, mode, measure, query_id)
            match = per_query[list(columns)] == pd.Series(cell, index=list(columns))
            value = per_query.loc[match.all(axis=1), "value"]
            assert len(value) == 1 and float(value.iloc[0]) == pytest.approx(after, abs=5e-5)
    assert "is 'provider_order' in the run" in err


def test_better_beyond_tolerance_is_improved_and_passes(
    ci_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = yaml.safe_load(BASELINE.read_text())
    entry = gated_entries(data)[0]
    entry["mean"] = round(entry["mean"] - 0.01, 4)
    entry["queries"] = {q: round(v - 0.01, 4) for q, v in entry["queries"].items()}
    lowered = tmp_path / "lowered.yaml"
    lowered.write_text(yaml.safe_dump(data))
    assert main([str(ci_run), "--baseline", str(lowered)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("PASS: ") and out.splitlines()[3].startswith("IMPROVED")
    assert "1 IMPROVED" in out and "--update" in out


def test_a_control_that_got_worse_is_reported_and_passes(
    ci_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = yaml.safe_load(BASELINE.read_text())
    controls = [e for e in data["checks"] if e["stage"] == "control" and e["round"] == 1]
    for entry in controls:
        entry["mean"] = round(entry["mean"] + 0.05, 4)  # the run now looks 0.05 worse
    raised = tmp_path / "raised.yaml"
    raised.write_text(yaml.safe_dump(data))
    assert main([str(ci_run), "--baseline", str(raised), "--verbose"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines()[3:] if line.startswith("REPORTED")]
    assert len(rows) == len(controls) and len(controls) == 2 * 3 * 5  # users × modes × measures
    assert all(row[0] == "REPORTED" and row[4] == "control" for row in rows)
    assert all(float(row[10]) == pytest.approx(-0.05, abs=1e-4) for row in rows)
    assert f"({len(controls)} moved" in out and "0 FAIL" in out


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["checks"][0].update(config_id="c99"), "config_id=c99"),
        (lambda d: d["checks"][0].update(measure="P@1000"), "measure=P@1000"),
        (lambda d: d.update(query_set="cacm"), "query set 'cacm'"),
        (lambda d: d.pop("checks"), "needs a 'checks' list"),
        (lambda d: d.update(checks=d["checks"][:42]), "does not cover the gated cell"),
        (lambda d: d.pop("format"), "an old baseline format"),
    ],
)
def test_a_baseline_the_run_does_not_match_is_an_error(
    ci_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, message: str
) -> None:
    data = yaml.safe_load(BASELINE.read_text())
    edit(data)  # type: ignore[operator]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    assert main([str(ci_run), "--baseline", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_update_writes_a_baseline_that_then_passes(ci_run: Path, tmp_path: Path) -> None:
    path = tmp_path / "new.yaml"
    assert main([str(ci_run), "--baseline", str(path), "--update"]) == 0
    data = yaml.safe_load(path.read_text())
    assert data["query_set"] == "cranfield" and data["cassette_manifest_sha256"]
    summary = pd.read_csv(ci_run / "summary.csv")
    assert len(data["checks"]) == len(summary)
    assert data["gate"] == {"stages": ["rerank", "expand"], "measures": ["nDCG@10"],
                            "modes": ["full", "residual", "frozen"]}  # fmt: skip
    # 2 users × 2 rounds × 2 feedback stages × 3 modes, but for cells fixed in frozen mode
    gated_cells = summary["stage"].isin(["rerank", "expand"]) & (summary["measure"] == "nDCG@10")
    fixed = int((summary["fixed"] & gated_cells).sum()) if "fixed" in summary else 0
    gated = gated_entries(data)
    assert len(gated) == 2 * 2 * 2 * 3 - fixed
    assert all(len(e["queries"]) == e["n"] for e in gated)
    assert {e["n"] for e in gated if e["eval_mode"] == "full"} == {40}
    assert main([str(ci_run), "--baseline", str(path)]) == 0
