"""A run's Parquet tables, damaged: a column of the wrong type (strings where numbers
belong) is refused in one line naming the table and the column, with a non-zero exit, by
``report`` and ``export`` alike, and ``export --format csv`` never writes non-numeric scores
(issue 31, item 8: 19-51-line tracebacks, and a CSV of strings with exit 0)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from evidence_bench.__main__ import main as bench_main
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.record import record
from evidence_bench.experiment.run import perform_run
from tests.conftest import write_tiny_collection
from tests.test_faults_secrets import _run as run_main


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the tiny collection, simulated; each test damages a copy."""
    root = tmp_path_factory.mktemp("tables")
    collection = write_tiny_collection(root / "tiny")
    overrides = [
        "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={collection}", f"query_set.cassettes={root / 'cassettes'}",
        f"runs_dir={root / 'runs'}", "experiment.depth=10", "experiment.rounds=1",
        "workers=1", "progress=false", "report=false",
    ]  # fmt: skip
    cfg, _ = compose(overrides)
    record(plan_run(cfg), provider="simulator", rounds=1)
    cfg, text = compose([*overrides, "replay.on_miss=error"])
    return perform_run(cfg, text).path


def _as_text(table: pa.Table, column: str) -> pa.Table:
    """``table`` with ``column``'s values written as strings (what a foreign writer did)."""
    values = table[column]
    if pa.types.is_dictionary(values.type):
        values = values.cast(values.type.value_type)
    if pa.types.is_list(values.type):
        text = pa.array([json.dumps(v) for v in values.to_pylist()], pa.string())
    else:
        text = pc.cast(values, pa.string())
    return table.set_column(table.column_names.index(column), column, text)


def _as_numbers(table: pa.Table, column: str) -> pa.Table:
    numbers = pa.array(range(table.num_rows), pa.int64())
    return table.set_column(table.column_names.index(column), column, numbers)


#: (table, column, damage, the type the file then holds, the kind the message expects)
CASES = [
    ("scores", "value", _as_text, "string", "number"),
    ("scores", "round", _as_text, "string", "integer"),
    ("scores", "query_id", _as_numbers, "int64", "text"),
    ("summary", "mean", _as_text, "string", "number"),
    ("summary", "fixed", _as_text, "string", "boolean"),
    ("feedback", "rank", _as_text, "string", "integer"),
    ("episodes", "marks", _as_text, "string", "integer"),
    ("runs", "ranking", _as_text, "string", "integer"),
    ("rankings", "items", _as_text, "string", "list of text"),
    ("trec_qrels", "relevance", _as_text, "string", "integer"),
]


def _damaged(tiny_run: Path, tmp_path: Path, table: str, column: str, change: object) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    path = run_dir / f"{table}.parquet"
    pq.write_table(change(pq.read_table(path), column), path)  # type: ignore[operator]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest.pop("tables", None)  # as a run from before the manifest held checksums
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def _command(argv: list[str], capfd: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_main(bench_main, argv, capfd)


#: Each command with the tables it reads (report reads the episodes only for its examples).
COMMANDS = {
    "report": (["report"], {"scores", "summary"}),
    "export-csv": (
        ["export", "--format", "csv"],
        {"scores", "summary", "feedback", "episodes", "rankings"},
    ),
    "export-trec": (["export", "--format", "trec"], {"runs", "rankings", "trec_qrels"}),
}


@pytest.mark.parametrize(
    ("command", "table", "column", "change", "held", "kind"),
    [
        pytest.param(argv, *case, id=f"{name}-{case[0]}.{case[1]}")
        for name, (argv, reads) in COMMANDS.items()
        for case in CASES
        if case[0] in reads
    ],
)
def test_a_column_of_the_wrong_type_is_one_line(
    tiny_run: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    command: list[str],
    table: str,
    column: str,
    change: object,
    held: str,
    kind: str,
) -> None:
    run_dir = _damaged(tiny_run, tmp_path, table, column, change)
    before = sorted(p.name for p in run_dir.iterdir())
    status, out, err = _command([command[0], str(run_dir), *command[1:]], capfd)
    assert status == 1, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{table}.parquet: column '{column}' holds {held}, expected {kind};" in err, err
    if command[0] == "export":  # nothing half-written beside the run's own files
        assert sorted(p.name for p in run_dir.iterdir()) == before


def test_an_intact_run_reports_and_exports(
    tiny_run: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """The control: the same copy, undamaged, goes through every command."""
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    for argv in (["report"], ["export", "--format", "csv"], ["export", "--format", "trec"]):
        status, _, err = _command([argv[0], str(run_dir), *argv[1:]], capfd)
        assert status == 0, err
    scores = (run_dir / "per_query.csv").read_text().splitlines()
    assert scores[0].split(",")[-1] == "value"
    assert all(float(line.rsplit(",", 1)[1]) >= 0 for line in scores[1:])


# -- the tables' checksums in the manifest ------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_manifest_holds_each_tables_checksum(tiny_run: Path) -> None:
    listed = json.loads((tiny_run / "manifest.json").read_text())["tables"]
    assert listed == {p.name: _sha256(p) for p in sorted(tiny_run.glob("*.parquet"))}
    assert set(listed) == {f"{t}.parquet" for t in {c[0] for c in CASES}}


def _edited(table: pa.Table) -> pa.Table:
    """The same table, valid and of the same schema, one row fewer (a hand edit)."""
    return table.slice(0, table.num_rows - 1)


@pytest.mark.parametrize("how", ["edited", "swapped"])
@pytest.mark.parametrize("table", sorted({c[0] for c in CASES}))
def test_report_refuses_a_table_swapped_or_edited(
    tiny_run: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], table: str, how: str
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    path = run_dir / f"{table}.parquet"
    if how == "edited":
        pq.write_table(_edited(pq.read_table(path)), path)
    else:  # another table of the run under this one's name
        other = "summary" if table != "summary" else "scores"
        shutil.copy(run_dir / f"{other}.parquet", path)
    status, out, err = _command(["report", str(run_dir)], capfd)
    assert status == 1, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{run_dir}: table {table}.parquet is not the one the run wrote" in err, err
    assert not (run_dir / "report.html").exists()


def test_a_run_without_checksums_still_reports_and_says_so(
    tiny_run: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_run, run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    del manifest["tables"]
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    status, _, err = _command(["report", str(run_dir)], capfd)
    assert status == 0, err
    assert (
        f"report: note: {run_dir} was written before runs kept their tables' checksums: "
        "its tables are read unchecked"
    ) in err.splitlines()


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("shards")
    collection = write_tiny_collection(root / "tiny")
    overrides = [
        "+experiment=ci", "query_set=beir", "query_set.name=tiny",
        f"query_set.path={collection}", f"query_set.cassettes={root / 'cassettes'}",
        "experiment.depth=10", "experiment.rounds=1", "workers=1", "progress=false",
        "report=false", "shards=2",
    ]  # fmt: skip
    cfg, _ = compose([*overrides, f"runs_dir={root / 'r'}"])
    record(plan_run(cfg), provider="simulator", rounds=1)
    paths = []
    for index in range(2):
        cfg, text = compose([*overrides, f"shard={index}", f"runs_dir={root / str(index)}"])
        paths.append(perform_run(cfg, text).path)
    return paths


@pytest.mark.parametrize("table", ["scores", "feedback", "episodes"])
def test_gather_refuses_a_shard_whose_table_was_edited(
    shards: list[Path], tmp_path: Path, capfd: pytest.CaptureFixture[str], table: str
) -> None:
    copies = []
    for index, shard in enumerate(shards):
        copies.append(tmp_path / f"shard{index}")
        shutil.copytree(shard, copies[-1])
    path = copies[1] / f"{table}.parquet"
    pq.write_table(_edited(pq.read_table(path)), path)
    status, out, err = _command(["gather", *map(str, copies)], capfd)
    assert status == 1, (out, err)
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{copies[1]}: table {table}.parquet is not the one the run wrote" in err, err
    status, out, err = _command(["gather", str(shards[0]), str(shards[1])], capfd)
    assert status == 0, err  # the intact shards gather
