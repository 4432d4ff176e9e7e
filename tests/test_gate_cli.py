"""``check``'s start-up: its help answers before the gate's readers (and pandas, scipy) are
imported, and the package's lazy names still resolve."""

from __future__ import annotations

import pytest

import evidence_bench.gate
from evidence_bench.gate._baseline import FEEDBACK_STAGES
from evidence_bench.gate._cli import DEFAULT_STAGES
from tests.test_startup import HEAVY, _imported


def test_check_help_answers_before_its_imports() -> None:
    done, names = _imported("-m", "evidence_bench", "check", "--help")
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.startswith("usage: python -m evidence_bench check")
    assert "(default: rerank,expand)" in " ".join(done.stdout.split())
    assert names.isdisjoint(HEAVY), sorted(names & set(HEAVY))


def test_a_usage_error_answers_before_its_imports() -> None:
    done, names = _imported("-m", "evidence_bench", "check", "somewhere")
    assert done.returncode == 2
    assert "--baseline" in done.stderr
    assert names.isdisjoint(HEAVY), sorted(names & set(HEAVY))


def test_the_helps_default_stages_are_the_baselines() -> None:
    assert DEFAULT_STAGES == FEEDBACK_STAGES


def test_every_lazy_name_resolves_and_is_listed() -> None:
    names = evidence_bench.gate.__all__
    for name in names:
        assert getattr(evidence_bench.gate, name) is not None, name
    assert set(names) <= set(dir(evidence_bench.gate))
    with pytest.raises(AttributeError, match="has no attribute 'Nonesuch'"):
        evidence_bench.gate.Nonesuch  # type: ignore[attr-defined]  # noqa: B018
