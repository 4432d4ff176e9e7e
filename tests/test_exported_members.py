"""The public face: what ``evidence_bench`` exports, and that every command is documented."""

from __future__ import annotations

from pathlib import Path

import evidence_bench

ROOT = Path(__file__).resolve().parents[1]


def test_all_is_sorted_and_complete() -> None:
    exported = evidence_bench.__all__
    assert exported == sorted(exported, key=str.casefold) or exported == sorted(exported)
    public = {name for name in dir(evidence_bench) if not name.startswith("_")}
    modules = {"api", "collections", "web", "engine", "users", "protocol", "errors", "evidence",
               "evaluation", "experiment", "report", "gate", "cli", "seeding",
               "livefetch", "assess", "runs", "callbacks", "commands"}  # fmt: skip
    assert public - modules - set(exported) == set()
    for name in exported:
        assert hasattr(evidence_bench, name), name


def test_every_error_derives_from_the_one_base() -> None:
    errors = [getattr(evidence_bench, n) for n in evidence_bench.__all__ if n.endswith("Error")]
    assert len(errors) == 14
    for error in errors:
        assert issubclass(error, evidence_bench.EvidenceBenchError)


def _manual() -> str:
    """README.md and every page of the manual (not its build)."""
    pages = sorted(p for p in (ROOT / "docs").rglob("*.rst") if "_build" not in p.parts)
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *pages])


def test_every_command_and_experiment_is_documented_in_the_manual() -> None:
    manual = _manual()
    for command in ("run", "record", "serve", "report", "gather", "check", "livefetch"):
        assert f"python -m evidence_bench {command}" in manual, command
    for experiment in (ROOT / "conf" / "experiment").glob("*.yaml"):
        assert f"`{experiment.stem}`" in manual, experiment.stem
    for flag in ("--format json", "--limit", "--interactive", "--fetch"):
        assert flag in manual, flag
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme
