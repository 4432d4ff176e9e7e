"""``export``: a run's Parquet tables as the interchange files, and the tables themselves.

The exported files are checked against the run they came from (the values as stored, every
ranking through pytrec_eval in tests/test_experiment.py and tests/test_frozen.py, every byte
against the code before Parquet in tests/test_before_after.py); here: the command, its
errors, that nothing is half-written, and that shared results are stored once.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from evidence_bench.errors import DataError, WriteError
from evidence_bench.experiment import export as export_module
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.export import export_run
from evidence_bench.experiment.run import perform_run
from evidence_bench.runs.data import load_run
from evidence_bench.runs.store import read_table
from tests.fault_fixtures import main_in_process

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four Rocchio configs, two users, two rounds over 4 Cranfield queries: round 1's marks
    are the same for every config (same initial ranking, same user)."""
    runs = tmp_path_factory.mktemp("runs")
    cfg, text = compose(
        [
            "+experiment=rocchio_sweep",
            "experiment.queries=4",
            "experiment.grid.beta=[0.5,4.0]",
            "experiment.grid.gamma=[0.0,1.0]",
            f"runs_dir={runs}",
            "progress=false",
            "workers=1",
            "report=false",
        ]
    )
    return perform_run(cfg, text).path


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evidence_bench", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )


def test_export_writes_the_csvs_and_the_trec_files_elsewhere(
    sweep: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    # the CSVs by main in this process (the same command's answer); the TREC files by a
    # real `python -m evidence_bench export` process
    csv = main_in_process(
        "export", str(sweep), "--format", "csv", "--out", str(out),
        capfd=capfd, monkeypatch=monkeypatch,
    )  # fmt: skip
    assert csv.returncode == 0, csv.stderr
    trec = _cli("export", str(sweep), "--format", "trec", "--out", str(out))
    assert trec.returncode == 0, trec.stderr
    assert trec.stdout == f"exported: {out / 'trec'}\n"
    assert sorted(p.name for p in out.iterdir()) == [
        "configs.csv", "episodes.jsonl", "feedback.csv", "per_query.csv", "qrels.csv",
        "queries.csv", "summary.csv", "trec",
    ]  # fmt: skip
    assert not list(sweep.glob("*.csv.tmp")) and not list(out.glob(".export.*"))
    # 4 configs x 2 users x (round 0's initial and control, then 7 stages in each of 2 rounds)
    runs = sorted(p.name for p in (out / "trec").glob("*.run.gz"))
    assert len(runs) == 4 * 2 * (2 + 7 * 2)
    assert "c00.oracle.r0.initial.run.gz" in runs and "c03.noisy.r2.expand.run.gz" in runs
    per_query = pd.read_csv(out / "per_query.csv", dtype={"query_id": str})
    stored = read_table(sweep, "scores")
    assert len(per_query) == len(stored)
    assert per_query["query_id"].tolist() == stored["query_id"].astype(str).tolist()
    # the value a run stores is the one the CSV prints: ten significant digits
    assert per_query["value"].tolist() == stored["value"].tolist()
    assert "," not in (out / "trec" / "qrels.txt").read_text()


def test_shared_marks_and_rankings_are_stored_once(sweep: Path, tmp_path: Path) -> None:
    export_run(sweep, "csv", tmp_path)
    feedback = pd.read_csv(tmp_path / "feedback.csv", dtype=str)
    stored = read_table(sweep, "feedback")
    round_1 = feedback[feedback["round"] == "1"]
    # round 1's marks of one user and query are the same for the 4 configs: kept once
    assert len(round_1) == 4 * len(round_1[round_1["config_id"] == "c00"])
    assert len(stored) <= len(feedback) - 3 * len(round_1) // 4
    episodes = read_table(sweep, "episodes")
    assert len(episodes) == 4 * 2 * 4 * 2  # a row per config, user, query and round
    rankings = read_table(sweep, "rankings")
    runs = read_table(sweep, "runs")
    # one provider ranking per query in round 0, whatever the config and user: stored once
    initial = runs[(runs["stage"] == "initial") & (runs["round"] == 0)]
    assert initial.groupby("query_id", observed=True)["ranking"].nunique().eq(1).all()
    assert len(rankings) < len(runs) + 3 * len(episodes)
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 4 * 2 * 4 and all(len(json.loads(e)["rounds"]) == 2 for e in lines)


def test_the_report_of_a_run_uses_its_tables_not_csvs(sweep: Path) -> None:
    data = load_run(sweep)
    assert len(data.per_query) == len(read_table(sweep, "scores"))
    assert not (sweep / "per_query.csv").exists()


def test_an_unknown_format_is_a_usage_error(sweep: Path) -> None:
    done = _cli("export", str(sweep), "--format", "xml")
    assert done.returncode == 2
    assert "invalid choice: 'xml'" in done.stderr


def test_a_run_from_before_parquet_says_to_run_it_again(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "per_query.csv").write_text("config_id,policy\n")
    (tmp_path / "episodes.jsonl").write_text("")
    with pytest.raises(DataError) as caught:
        export_run(tmp_path, "csv")
    message = str(caught.value)
    assert "\n" not in message
    assert f"{tmp_path / 'scores.parquet'}: file not found" in message
    assert "run it again" in message
    done = _cli("export", str(tmp_path), "--format", "trec")
    assert done.returncode == 1
    assert done.stderr.startswith("evidence_bench: export: ") and done.stderr.count("\n") == 1


def test_a_damaged_table_names_the_file(sweep: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(sweep, run)
    (run / "runs.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataError, match=r"runs\.parquet: cannot be read as Parquet"):
        export_run(run, "trec")
    assert not (run / "trec").exists()


def test_a_failed_export_leaves_what_was_there(
    sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export_run(sweep, "csv", tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "write_jsonl", full)
    with pytest.raises(WriteError, match="No space left on device") as caught:
        export_run(sweep, "csv", tmp_path)
    assert "\n" not in str(caught.value)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_directory_where_a_file_goes_stops_the_export_before_anything_moves(
    sweep: Path, tmp_path: Path
) -> None:
    """feedback.csv is a directory: per_query.csv and summary.csv were replaced before the
    export failed on it, and the message said the files were as they were."""
    for name in ("per_query.csv", "summary.csv"):
        (tmp_path / name).write_text("OLD")
    (tmp_path / "feedback.csv").mkdir()
    with pytest.raises(WriteError) as caught:
        export_run(sweep, "csv", tmp_path)
    assert str(caught.value) == (
        f"cannot export into {tmp_path}: {tmp_path / 'feedback.csv'} is a directory; move it away"
    )
    assert [(tmp_path / n).read_text() for n in ("per_query.csv", "summary.csv")] == ["OLD"] * 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "feedback.csv", "per_query.csv", "summary.csv"
    ]  # fmt: skip


def test_a_file_of_yours_in_trec_is_never_deleted(sweep: Path, tmp_path: Path) -> None:
    export_run(sweep, "trec", tmp_path)  # trec/ of its own: replaced whole next time
    assert export_run(sweep, "trec", tmp_path) == [tmp_path / "trec"]
    (tmp_path / "trec" / "notes.txt").write_text("important")
    with pytest.raises(WriteError, match=r"trec holds files export does not write \(notes\.txt\)"):
        export_run(sweep, "trec", tmp_path)
    assert (tmp_path / "trec" / "notes.txt").read_text() == "important"


def test_a_rename_that_fails_puts_back_what_it_replaced(
    sweep: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    export_run(sweep, "csv", tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    rename = export_module.os.rename
    placed: list[str] = []

    def failing(source: object, destination: object) -> None:
        if Path(str(destination)).parent == tmp_path:  # a staged file going into place
            placed.append(Path(str(destination)).name)
            if len(placed) == 3:
                raise OSError(13, "Permission denied", str(destination))
        rename(source, destination)  # type: ignore[arg-type]

    monkeypatch.setattr(export_module.os, "rename", failing)
    with pytest.raises(WriteError, match="Permission denied"):
        export_run(sweep, "csv", tmp_path)
    monkeypatch.undo()
    assert placed[:3] == ["per_query.csv", "summary.csv", "feedback.csv"]
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_the_gate_reads_the_tables_and_names_a_bad_row(sweep: Path, tmp_path: Path) -> None:
    from evidence_bench.gate._run import read_run
    from evidence_bench.runs.store import write_table

    run = tmp_path / "run"
    shutil.copytree(sweep, run)
    facts = read_run(run)
    summary = read_table(run, "summary")
    assert len(facts.cells) == len(summary)
    cell = next(iter(facts.cells))
    values = facts.values([cell])[cell]
    assert len(values) == facts.cells[cell].n == 4
    summary.loc[2, "mean"] = float("nan")
    write_table(run / "summary.parquet", summary)
    with pytest.raises(DataError) as caught:
        read_run(run)
    assert str(caught.value) == (
        f"{run / 'summary.parquet'} row 3: mean is NaN or empty, not a finite number"
    )
