"""A run writes its Parquet files in a thread while its report is computed
(:class:`~evidence_bench.runs.store.TablesWriter`): the same files as written alone,
and a failed write still fails the run in one line with nothing kept."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

import evidence_bench.runs.store as store
from evidence_bench.errors import WriteError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.report.fresh import new_run_report
from evidence_bench.runs.store import RunTables, TablesWriter

#: The first 5 Cranfield queries, one config, an oracle user, one round.
SMOKE = ["+experiment=smoke", "workers=1", "progress=false"]
PARQUET = [
    "episodes",
    "feedback",
    "rankings",
    "runs",
    "scores",
    "summary",
    "trec_qrels",
]


def _run(runs: Path, *extra: str) -> Path:
    cfg, text = compose([*SMOKE, f"runs_dir={runs}", *extra])
    return perform_run(cfg, text, report=new_run_report).path


def test_the_files_written_beside_the_report_are_those_written_alone(tmp_path: Path) -> None:
    # report=false: the tables written beside the small CSV files only, no analysis
    alone = _run(tmp_path / "alone", "report=false")
    beside = _run(tmp_path / "beside")
    assert (beside / "report.html").is_file()
    assert sorted(p.stem for p in beside.glob("*.parquet")) == PARQUET
    for name in PARQUET:
        path = f"{name}.parquet"
        assert (beside / path).read_bytes() == (alone / path).read_bytes(), path
    # the stored analysis' key hashed the files whole: the next report reads it
    from evidence_bench.report.page import report

    assert report(beside)[1] == "analysis read from analysis.json.gz (its key matches the run)"


def test_a_write_that_fails_in_the_thread_fails_the_run_in_one_line_keeping_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    good = _run(runs, "report=false")
    writer_threads: list[str] = []
    real = store.write_table

    def blocked(path: Path, frame: Any) -> None:
        writer_threads.append(threading.current_thread().name)
        if path.name == "episodes.parquet":
            path.mkdir()  # Arrow cannot open it: a real IsADirectoryError, naming no file
        real(path, frame)

    monkeypatch.setattr(store, "write_table", blocked)
    with pytest.raises(WriteError) as caught:
        _run(runs)
    message = str(caught.value)
    assert message.startswith(f"could not write the run {runs / 'smoke'}/")
    assert "Is a directory" in message
    assert message.endswith("(writing episodes.parquet); nothing was kept")
    assert "\n" not in message
    assert set(writer_threads) == {"write_tables"}  # written beside the report, not by it
    # nothing of the failed run: no directory, no reservation, no staging; latest unchanged
    assert sorted(p.name for p in (runs / "smoke").iterdir()) == sorted(["latest", good.name])
    assert (runs / "smoke" / "latest").resolve() == good.resolve()


def _tables() -> RunTables:
    import pandas as pd

    empty = pd.DataFrame()
    return RunTables(empty, empty, empty, [], empty, empty)


def test_the_writer_raises_the_thread_s_error_once_and_yields_to_the_block_s(
    tmp_path: Path,
) -> None:
    calls: list[Path] = []

    def failing(directory: Path, tables: RunTables) -> None:
        calls.append(directory)
        raise OSError(28, "No space left on device")

    writer = TablesWriter(tmp_path, _tables(), failing)
    writer.start()
    writer.start()  # once only
    with pytest.raises(OSError, match="No space left"):
        writer.join()
    writer.join()  # raised once: the run has already failed on it
    assert calls == [tmp_path]

    # the block's own error is the one raised; the thread has finished by then
    finished = threading.Event()

    def slow(directory: Path, tables: RunTables) -> None:
        finished.wait(0.05)
        finished.set()
        raise OSError(28, "No space left on device")

    with pytest.raises(KeyError, match="the block's"), TablesWriter(tmp_path, _tables(), slow) as w:
        w.start()
        raise KeyError("the block's")
    assert finished.is_set()

    # never started: leaving the block writes them; a block that fails first writes nothing
    written: list[Path] = []
    with TablesWriter(tmp_path, _tables(), lambda d, t: written.append(d)):
        pass
    assert written == [tmp_path]
    with pytest.raises(KeyError), TablesWriter(tmp_path, _tables(), lambda d, t: written.append(d)):
        raise KeyError("first")
    assert written == [tmp_path]
