"""The report's stored analysis (report/stored.py): written by the run, read by ``report``
only when its key matches the run exactly, and the page rendered from it is the page
computed afresh, byte for byte."""

from __future__ import annotations

import gzip
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from markupsafe import Markup

from evidence_bench.__main__ import main
from evidence_bench.errors import WriteError
from evidence_bench.evaluation.statistics import MIN_TRIALS
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.report import page, stored
from evidence_bench.report.fresh import new_run_report
from evidence_bench.report.page import DEFAULT_TRIALS, MAX_EPISODES, report
from tests.test_startup import _imported

#: A small sweep on the shipped Cranfield cassettes: two users (the validity panel), four
#: configs over two swept parameters (the heatmap), two rounds.
SWEEP = [
    "+experiment=rocchio_sweep",
    "experiment.queries=5",
    "experiment.grid.beta=[0.5,4.0]",
    "experiment.grid.gamma=[0.0,1.0]",
    "progress=false",
    "workers=1",
]


#: The smoke experiment's first 3 queries (one config, the oracle, one round): for the tests
#: of what makes a stored analysis untrusted (a changed key, a chart that is not one), which
#: the report checks before any number, the same whatever the run; each then computes the
#: analysis anew, ~0.5 s of CPU less than the sweep's (which the tests of a trusted or
#: recomputed page, byte for byte, and of every chart a run draws still read).
SMALL = ["+experiment=smoke", "experiment.queries=3", "progress=false", "workers=1"]


def _made(tmp_path_factory: pytest.TempPathFactory, overrides: list[str]) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    cfg, text = compose([*overrides, f"runs_dir={runs}"])
    return Path(perform_run(cfg, text, report=new_run_report).path)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _made(tmp_path_factory, SWEEP)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _made(tmp_path_factory, SMALL)


@pytest.fixture
def copy(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(run, target)
    return target


@pytest.fixture
def small_copy(small_run: Path, tmp_path: Path) -> Path:
    target = tmp_path / "run"
    shutil.copytree(small_run, target)
    return target


def _stored(run_dir: Path) -> tuple[dict[str, Any], str]:
    with gzip.open(run_dir / stored.FILE, "rt", encoding="utf-8") as lines:
        return json.loads(lines.readline()), lines.readline()


def _marked(run_dir: Path, marker: str) -> None:
    """Put ``marker`` into the stored context's experiment name, its key left as it is."""
    key, context = _stored(run_dir)
    data = json.loads(context)
    data["header"]["experiment"] = marker
    text = json.dumps(key) + "\n" + json.dumps(data) + "\n"
    (run_dir / stored.FILE).write_bytes(gzip.compress(text.encode()))


def test_the_run_stores_its_analysis_under_its_key(run: Path) -> None:
    key, _ = _stored(run)
    assert key == stored.analysis_key(run, trials=MIN_TRIALS, max_episodes=MAX_EPISODES)
    assert key["trials"] == 5000 and key["max_episodes"] == 20 and key["seed"] == 0
    assert "scores.parquet" in key["inputs"] and "manifest.json" in key["inputs"]
    assert "report.html" not in key["inputs"] and stored.FILE not in key["inputs"]


def test_the_report_from_the_stored_analysis_is_the_report_computed(copy: Path) -> None:
    computed = (copy / "report.html").read_bytes()  # the run's, from its frames in memory
    (copy / "report.html").unlink()
    path, note = report(copy)
    assert note == "analysis read from analysis.json.gz (its key matches the run)"
    assert path.read_bytes() == computed


def test_recomputing_from_the_files_gives_the_same_page_and_the_same_stored_bytes(
    run: Path, copy: Path
) -> None:
    (copy / stored.FILE).unlink()
    (copy / "report.html").unlink()
    path, note = report(copy)
    assert note == "analysis computed (no analysis.json.gz); stored in analysis.json.gz"
    assert path.read_bytes() == (run / "report.html").read_bytes()
    assert (copy / stored.FILE).read_bytes() == (run / stored.FILE).read_bytes()
    assert report(copy)[1].startswith("analysis read from")


def test_a_matching_key_is_trusted(copy: Path) -> None:
    _marked(copy, "stored-marker")
    path, note = report(copy)
    assert note.startswith("analysis read from")
    assert "stored-marker · evidence_bench report" in path.read_text("utf-8")


def test_a_changed_table_is_not_trusted(copy: Path) -> None:
    # as a run from before the manifest kept its tables' checksums (with them, the changed
    # table is refused: tests/test_faults_tables.py)
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["tables"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    report(copy)  # the analysis stored under the key of the run as it is now
    _marked(copy, "stored-marker")
    table = pq.read_table(copy / "scores.parquet")  # the same rows, written anew: other bytes
    pq.write_table(table, copy / "scores.parquet", compression="snappy")
    path, note = report(copy)
    assert note == (
        "analysis computed (analysis.json.gz is stale: scores.parquet changed); "
        "stored in analysis.json.gz"
    )
    assert "stored-marker" not in path.read_text("utf-8")
    assert report(copy)[1].startswith("analysis read from")  # the fresh one matches


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda key: key.update(trials=20), "trials 20, now 5000"),
        (lambda key: key.update(max_episodes=3), "max_episodes 3, now 20"),
        (lambda key: key.update(seed=7), "seed 7, now 0"),
        (lambda key: key.update(sources="0" * 64), "the package's sources changed"),
        (lambda key: key.update(format=0), "its format changed"),
        (lambda key: key.update(package_version="0.0"), "package_version '0.0', now"),
        (lambda key: key["libraries"].update(numpy="1.0"), "the libraries' versions changed"),
        (lambda key: key["inputs"].pop("queries.csv"), "queries.csv is new"),
        (lambda key: key["inputs"].update({"old.csv": "0"}), "old.csv is gone"),
    ],
)
def test_a_changed_key_is_not_trusted(small_copy: Path, change: Any, why: str) -> None:
    copy = small_copy
    _marked(copy, "stored-marker")
    key, context = _stored(copy)
    change(key)
    text = json.dumps(key) + "\n" + context
    (copy / stored.FILE).write_bytes(gzip.compress(text.encode()))
    path, note = report(copy)
    assert note.startswith(f"analysis computed (analysis.json.gz is stale: {why}")
    assert "stored-marker" not in path.read_text("utf-8")


def test_other_trials_recompute(copy: Path) -> None:
    _marked(copy, "stored-marker")
    _, note = report(copy, trials=20)
    assert note.startswith("analysis computed (analysis.json.gz is stale: trials 5000, now 20")
    assert "stored-marker" not in (copy / "report.html").read_text("utf-8")


@pytest.mark.parametrize(
    "chart",
    [
        "<p>not a chart</p>",
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><script>x()</script></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart" onload="x()"></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><a href="http://x/">t</a></svg>',
        # a second root after the chart (a meta refresh the page's CSP would not stop)
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"></svg>'
        '<meta http-equiv="refresh" content="0;url=https://example.invalid/">'
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><style>*{}</style></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><use href="#x"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><foreignObject/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><rect fill="url(http://x/)"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><rect xlink:href="x"/></svg>',
        '<svg xmlns="http://www.w3.org/2000/svg" class="chart"><!-- x --></svg>',
    ],
)
def test_a_chart_that_is_not_one_is_refused(small_copy: Path, chart: str) -> None:
    copy = small_copy
    key, context = _stored(copy)
    data = json.loads(context)
    data["forest"] = {"__markup__": chart}
    (copy / stored.FILE).write_bytes(
        gzip.compress((json.dumps(key) + "\n" + json.dumps(data) + "\n").encode())
    )
    path, note = report(copy)
    assert note.startswith("analysis computed (analysis.json.gz is not readable: a chart is")
    assert chart not in path.read_text("utf-8")


def test_every_chart_a_run_draws_is_accepted(copy: Path) -> None:
    _, context = _stored(copy)
    charts = re.findall(r'\{"__markup__":("(?:[^"\\]|\\.)*")\}', context)
    assert charts
    assert all(stored._is_chart(json.loads(chart)) for chart in charts)
    # a label the chart escapes (text and attribute) is a chart still
    chart = json.loads(charts[0])
    end = chart.index("</title>") + len("</title>")
    label = '<text x="1" aria-label="a &lt; b &#34;q&#34;">beta &lt;b&gt; 1 &amp; 2</text>'
    assert stored._is_chart(chart[:end] + label + chart[end:])


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        (lambda data: data.update(header={"__tuple__": 5}), "is not readable"),
        (lambda data: data.clear() or data.update(header={}), "does not fit the report"),
    ],
)
def test_a_stored_context_that_does_not_fit_is_computed_anew(
    copy: Path, damage: Any, why: str
) -> None:
    key, context = _stored(copy)
    data = json.loads(context)
    damage(data)
    (copy / stored.FILE).write_bytes(
        gzip.compress((json.dumps(key) + "\n" + json.dumps(data) + "\n").encode())
    )
    path, note = report(copy)
    assert note.startswith(f"analysis computed (analysis.json.gz {why}"), note
    assert "<title>" in path.read_text("utf-8")


def test_a_damaged_file_is_not_trusted(copy: Path) -> None:
    (copy / stored.FILE).write_bytes(b"not gzip")
    _, note = report(copy)
    assert note.startswith("analysis computed (analysis.json.gz is not readable:")


def test_an_exported_csv_beside_its_table_is_not_an_input(copy: Path) -> None:
    before = stored.analysis_key(copy, trials=MIN_TRIALS, max_episodes=MAX_EPISODES)
    (copy / "per_query.csv").write_text("config_id\n")  # the report reads scores.parquet
    (copy / ".report.html.123.tmp").write_text("staging")
    assert stored.analysis_key(copy, trials=MIN_TRIALS, max_episodes=MAX_EPISODES) == before
    (copy / "folds.csv").write_text("fold\n")  # a tuning run's file: read when present
    after = stored.analysis_key(copy, trials=MIN_TRIALS, max_episodes=MAX_EPISODES)
    assert set(after["inputs"]) - set(before["inputs"]) == {"folds.csv"}


def test_the_report_command_says_which(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["report", str(copy)])
    captured = capsys.readouterr()
    assert captured.out == f"report: {copy.resolve() / 'report.html'}\n"
    assert captured.err == "report: analysis read from analysis.json.gz (its key matches the run)\n"


def test_a_report_from_its_stored_analysis_imports_no_pandas(copy: Path) -> None:
    done, names = _imported("-m", "evidence_bench", "report", str(copy))
    assert done.returncode == 0, done.stderr[-500:]
    assert "analysis read from" in done.stderr
    assert names.isdisjoint({"pandas", "numpy", "scipy", "pyarrow", "hydra"}), names


#: A key made by hand (a stored context is found under exactly its key).
KEY = {
    "format": 1, "package_version": "1.0", "sources": "abc", "seed": 0, "trials": 20,
    "max_episodes": 3, "inputs": {"scores.parquet": "def"}, "libraries": {"numpy": "2"},
}  # fmt: skip


def test_the_context_is_stored_exactly(tmp_path: Path) -> None:
    context = {
        "pairs": (("rerank", "control"), ("expand", "deep_control")),
        "by_tuple": {("a", 1): 2.5},
        "tag_like": {"__tuple__": [1]},
        "numbers": [0.1 + 0.2, -0.0, math.inf, 1e-300, 10**20, True, None],
        "chart": Markup('<svg xmlns="http://www.w3.org/2000/svg" class="chart"></svg>'),
        "text": "<b>web text</b> & more",
    }
    stored.store_context(tmp_path, KEY, context)
    with gzip.open(tmp_path / stored.FILE, "rt") as lines:
        assert json.loads(lines.readline()) == KEY
        raw = json.loads(lines.readline())
    assert raw["pairs"] == {"__tuple__": [{"__tuple__": ["rerank", "control"]},
                                          {"__tuple__": ["expand", "deep_control"]}]}  # fmt: skip
    assert raw["by_tuple"] == {"__dict__": [[{"__tuple__": ["a", 1]}, 2.5]]}
    assert raw["tag_like"] == {"__dict__": [["__tuple__", [1]]]}
    found, note = stored.load_context(tmp_path, KEY)
    assert found is not None, note
    assert found["pairs"] == (("rerank", "control"), ("expand", "deep_control"))
    assert found["by_tuple"] == {("a", 1): 2.5}
    assert found["tag_like"] == {"__tuple__": [1]}
    assert found["numbers"] == [0.30000000000000004, -0.0, math.inf, 1e-300, 10**20, True, None]
    assert math.copysign(1.0, found["numbers"][1]) == -1.0
    assert type(found["numbers"][5]) is bool and type(found["numbers"][4]) is int
    assert type(found["chart"]) is Markup and type(found["text"]) is str
    assert found["text"] == "<b>web text</b> & more"


@pytest.mark.parametrize("value", [np.float64(0.5), np.bool_(True), {1, 2}, object()])
def test_a_value_json_cannot_hold_exactly_is_refused(tmp_path: Path, value: Any) -> None:
    with pytest.raises(TypeError, match="cannot be stored exactly"):
        stored.store_context(tmp_path, KEY, {"rows": [{"x": value}]})
    assert list(tmp_path.iterdir()) == []


def test_the_pages_default_trials_are_the_statistics() -> None:
    assert DEFAULT_TRIALS == MIN_TRIALS
    assert (page.render_report.__kwdefaults__ or {})["trials"] == MIN_TRIALS


def test_a_report_that_cannot_be_written_is_one_line_and_keeps_what_was_there(
    copy: Path,
) -> None:
    """report.html is a directory (or the disk is full): a WriteError naming it, which the
    command prints in one line, not the OSError's traceback."""
    (copy / "report.html").unlink()
    (copy / "report.html").mkdir()
    (copy / "report.html" / "kept").write_text("mine")
    with pytest.raises(WriteError) as caught:
        report(copy)
    assert str(caught.value) == (
        f"could not write {copy / 'report.html'}: Is a directory; the file on disk is unchanged"
    )
    assert (copy / "report.html" / "kept").read_text() == "mine"
    assert not [p for p in copy.iterdir() if p.name.startswith(".report.html")]
