"""The numbers of a run do not change under the performance refactor (issue 13).

``tests/data/before_refactor`` holds three small runs (a Rocchio sweep, every ranker on CACM,
every simulated user over two rounds) captured by its ``capture.py`` from the code before the
refactor. Each is run again here, its tables exported as the files runs wrote then
(``export --format csv`` and ``--format trec``), and every per-query value, feedback mark,
summary row, paired comparison and ranking must be the same: equal as written, to the ten
significant digits a CSV holds.
"""

from __future__ import annotations

import gzip
import io
import runpy
from pathlib import Path

import pandas as pd
import pytest

from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.report.tables import summary_rows
from evidence_bench.runs.data import load_run
from tests.conftest import exported

BEFORE = Path(__file__).parent / "data" / "before_refactor"
RUNS: dict[str, list[str]] = runpy.run_path(str(BEFORE / "capture.py"), run_name="golden")["RUNS"]
FILES = ("per_query.csv", "feedback.csv", "summary.csv", "configs.csv")


def _frame(data: bytes) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False)


def _same(name: str, before: pd.DataFrame, after: pd.DataFrame) -> None:
    assert list(after.columns) == list(before.columns), name
    assert len(after) == len(before), f"{name}: {len(after)} rows, {len(before)} before"
    diff = (after != before).any(axis=1)
    assert not diff.any(), (
        f"{name}: first changed rows\n{before[diff].head()}\n{after[diff].head()}"
    )


@pytest.fixture(scope="module", params=sorted(RUNS))
def run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, Path]:
    runs = tmp_path_factory.mktemp(request.param)
    # as capture.py ran it, but for the report, which holds no number compared here
    overrides = [*RUNS[request.param], f"runs_dir={runs}", "progress=false", "workers=1"]
    cfg, text = compose([*overrides, "report=false"])
    return request.param, exported(Path(perform_run(cfg, text).path))


def test_files_are_unchanged(run: tuple[str, Path]) -> None:
    name, path = run
    for file in FILES:
        before = _frame(gzip.decompress((BEFORE / f"{name}.{file}.gz").read_bytes()))
        _same(f"{name} {file}", before, _frame((path / file).read_bytes()))


#: Comparison columns added since the capture, each a figure of its own (none changes another):
#: ``gain_spread_common``, the common queries' max − min gain, for the best's interval.
ADDED = ["gain_spread_common"]


def test_comparisons_are_unchanged(run: tuple[str, Path]) -> None:
    name, path = run
    table = summary_rows(load_run(path)).drop(columns=ADDED)
    after = _frame(table.to_csv(index=False, float_format="%.10g").encode())
    before = _frame(gzip.decompress((BEFORE / f"{name}.comparisons.csv.gz").read_bytes()))
    _same(f"{name} comparisons", before, after)


def test_rankings_are_unchanged(run: tuple[str, Path]) -> None:
    name, path = run
    after = "".join(
        f"# {t.name}\n"
        + (gzip.decompress(t.read_bytes()).decode() if t.suffix == ".gz" else t.read_text())
        for t in sorted((path / "trec").glob("*"))
    )
    before = gzip.decompress((BEFORE / f"{name}.trec.txt.gz").read_bytes()).decode()
    assert after == before, f"{name}: the TREC rankings changed"
