"""The regression gate: the committed CI baseline passes, a degraded ranker fails CI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.gate import main

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
    return perform_run(cfg, text).path


@pytest.fixture(scope="module")
def ci_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_ci(tmp_path_factory.mktemp("ci"))


def test_the_committed_baseline_passes(ci_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(ci_run), "--baseline", str(BASELINE)]) == 0
    out = capsys.readouterr().out
    assert "0 FAIL" in out and "0 IMPROVED" in out


def test_a_degraded_ranker_fails_naming_measure_place_and_delta(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    degraded = run_ci(tmp_path, "ranker=provider_order")
    assert main([str(degraded), "--baseline", str(BASELINE)]) == 1
    out, err = capsys.readouterr()
    header, first = out.splitlines()[:2]
    assert header.split() == ["status", "config", "policy", "round", "stage", "mode", "measure",
                              "expected", "actual", "delta"]  # fmt: skip
    status, config, policy, _round, stage, mode, measure, expected, actual, delta = first.split()
    assert status == "FAIL" and config == "c00" and stage in ("rerank", "expand")
    assert policy in ("oracle", "noisy") and mode in ("full", "residual", "frozen")
    assert measure in ("nDCG@10", "P@10", "R@20", "AP", "RR")
    assert float(delta) == pytest.approx(float(actual) - float(expected), abs=2e-4)
    assert float(delta) < 0
    assert "is 'provider_order' in the run" in err


def test_better_beyond_tolerance_is_improved_and_passes(
    ci_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = yaml.safe_load(BASELINE.read_text())
    data["checks"][0]["mean"] -= 0.01
    lowered = tmp_path / "lowered.yaml"
    lowered.write_text(yaml.safe_dump(data))
    assert main([str(ci_run), "--baseline", str(lowered)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("status") and "IMPROVED" in out and "--update" in out


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["checks"][0].update(config_id="c99"), "config_id=c99"),
        (lambda d: d["checks"][0].update(measure="P@1000"), "measure=P@1000"),
        (lambda d: d.update(query_set="cacm"), "query set 'cacm'"),
        (lambda d: d.pop("checks"), "needs a 'checks' list"),
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
    summary = (ci_run / "summary.csv").read_text().splitlines()
    assert len(data["checks"]) == len(summary) - 1
    assert main([str(ci_run), "--baseline", str(path)]) == 0
