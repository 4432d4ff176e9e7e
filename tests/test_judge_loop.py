"""The judging loop end to end: record, run, pool, assess over HTTP, run again with the new qrels.

It starts where a user of live Brave starts (docs/tutorials/live-brave.rst): cassettes
recorded through the live provider, from a simulator on 127.0.0.1 standing in for Brave.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from evidence_bench.assess import Assessment, Judgments, make_server
from evidence_bench.collections.queryset import load_query_set
from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.pool import build_pool, read_pool, write_pool
from evidence_bench.experiment.run import perform_run
from evidence_bench.report.fresh import new_run_report
from evidence_bench.web.simulator import BraveSimulator, serve

pytestmark = pytest.mark.slow


def _run(runs: Path, *extra: str) -> Path:
    cfg, text = compose(["+experiment=smoke", f"runs_dir={runs}", "progress=false", *extra])
    return Path(perform_run(cfg, text).path)


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """``record provider=brave_live`` from a simulator that wants a token, as a user records
    from Brave; the overrides that replay what it wrote."""
    cassettes = tmp_path_factory.mktemp("live") / "cassettes"
    live = ["query_set.source=live", f"query_set.cassettes={cassettes}"]
    cranfield = {"name": "cranfield", "path": "pkg://collections/cranfield", "cassettes": "-"}
    simulator = BraveSimulator(load_query_set(cranfield, limit=None).collection, token="t0ken")
    with serve(simulator) as brave:
        env = {
            **os.environ,
            "BRAVE_SEARCH_API_KEY": "t0ken",
            "BRAVE_SEARCH_BASE_URL": brave.base_url,
        }
        command = [sys.executable, "-m", "evidence_bench", "record", "+experiment=smoke"]
        done = subprocess.run(
            [*command, "provider=brave_live", *live],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    assert "recorded 20 interactions for 5 queries" in done.stdout
    assert not any("t0ken" in file.read_text() for file in cassettes.iterdir())
    return live


@pytest.fixture(scope="module")
def first(recording: list[str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = _run(tmp_path_factory.mktemp("runs"), "report=false", *recording)
    replay = json.loads((run / "manifest.json").read_text())["replay"]
    assert replay["replayed"] > 0 and replay["simulated"] == 0  # all from the recording
    return run


def _call(
    port: int, method: str, path: str, body: object = None, **headers: str
) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    data = None if body is None else json.dumps(body)
    connection.request(
        method, path, body=data, headers={"Content-Type": "application/json", **headers}
    )
    answer = connection.getresponse()
    return answer.status, json.loads(answer.read())


def test_pool_is_the_unjudged_union_of_the_tops(first: Path) -> None:
    pool = build_pool(first, 10)
    qrels = pd.read_csv(first / "qrels.csv", dtype=str)
    judged = set(zip(qrels["query_id"], qrels["doc_id"], strict=True))
    keys = [(item.query_id, item.doc_id) for item in pool.items]
    assert keys and len(keys) == len(set(keys))  # deduplicated
    assert not judged & set(keys)  # minus what is judged
    assert pool.judged > 0
    # seeded: the same seed gives the same order, another seed another
    assert build_pool(first, 10).items == pool.items
    assert build_pool(first, 10, seed=1).items != pool.items
    assert sorted(build_pool(first, 10, seed=1).items, key=str) == sorted(pool.items, key=str)
    # the budget keeps the heaviest N of the same pool
    budgeted = build_pool(first, 10, budget=5)
    assert len(budgeted.items) == 5 and set(budgeted.items) <= set(pool.items)
    deeper = build_pool(first, 20)
    assert set(pool.items) <= set(deeper.items)


@pytest.mark.parametrize(
    ("depth", "qrels", "message"),
    [
        (0, None, "--depth 0: the pool depth must be at least 1"),
        (10, "bad", "bad.tsv:2: expected 3 columns"),
    ],
)
def test_pool_bad_input(
    first: Path, tmp_path: Path, depth: int, qrels: str | None, message: str
) -> None:
    path = None
    if qrels:
        path = tmp_path / "bad.tsv"
        path.write_text("query-id\tcorpus-id\tscore\n1\t2\n")
    with pytest.raises((ConfigurationError, DataError), match=message):
        build_pool(first, depth, qrels=path)


def test_pool_cli_one_line_errors(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "evidence_bench",
            "pool",
            str(tmp_path),
            "--depth",
            "5",
            "--out",
            str(tmp_path / "p.jsonl"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert (
        done.stderr.count("\n") == 1
        and "parquet: file not found (is this a run directory?)" in done.stderr
    )
    assert not (tmp_path / "p.jsonl").exists()


def test_the_loop_changes_the_numbers(recording: list[str], first: Path, tmp_path: Path) -> None:
    pool_file, qrels_file = tmp_path / "pool.jsonl", tmp_path / "qrels.tsv"
    write_pool(pool_file, build_pool(first, 10))
    items = read_pool(pool_file)
    server = make_server(Assessment(items, Judgments(qrels_file, "tester")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        status, state = _call(port, "GET", "/api/state")
        assert status == 200 and state["judged"] == 0 and state["at"] == 0
        # judge the first half highly relevant, one by one; undo the last and redo it
        for _ in range(len(items) // 2):
            status, state = _call(port, "POST", "/api/judge", {"at": state["at"], "grade": 3})
        status, undone = _call(port, "POST", "/api/undo", {})
        assert undone["item"]["grade"] is None and undone["judged"] == len(items) // 2 - 1
        _call(port, "POST", "/api/judge", {"at": undone["at"], "grade": 3})
        # refused: a foreign Host, a cross-site Origin, a form, a large body, a bad grade
        assert _call(port, "GET", "/api/state", Host="evil.example")[0] == 421
        assert _call(port, "POST", "/api/undo", {}, Origin="http://evil.example")[0] == 403
        assert _call(port, "POST", "/api/undo", {}, **{"Content-Type": "text/plain"})[0] == 415
        big = {"at": 0, "grade": 1, "pad": "x" * 5000}
        assert _call(port, "POST", "/api/judge", big)[0] == 413
        assert _call(port, "POST", "/api/judge", {"at": 0, "grade": 7})[0] == 400
    finally:
        server.shutdown()
        server.server_close()
    lines = qrels_file.read_text().splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore" and len(lines) == 1 + len(items) // 2
    log = [
        json.loads(line)
        for line in qrels_file.with_name("qrels.tsv.log.jsonl").read_text().splitlines()
    ]
    assert [entry["act"] for entry in log].count("undo") == 1
    assert {entry["assessor"] for entry in log} == {"tester"}
    # resumable: a new session starts at the first item not judged
    again = Assessment(items, Judgments(qrels_file, "tester")).state()
    assert again["judged"] == len(items) // 2 and again["item"]["grade"] is None
    # The rerun reads the new judgments, and its numbers move. The users mark by them, so
    # some refined queries differ from the recorded ones: a live recording cannot simulate
    # them, so those expand stages are skipped and counted (or recorded first).
    second = _run(
        tmp_path / "runs",
        "report=false",
        *recording,
        f"query_set.qrels={qrels_file}",
        "replay.on_miss=skip",
    )
    before = pd.read_parquet(first / "summary.parquet")
    after = pd.read_parquet(second / "summary.parquet")
    keys = ["config_id", "policy", "round", "stage", "eval_mode", "measure"]
    joined = before.merge(after, on=keys, suffixes=("_before", "_after"))
    assert len(joined) == len(before)
    assert (joined["mean_before"] != joined["mean_after"]).any()
    manifest = json.loads((second / "manifest.json").read_text())
    assert manifest["replay"]["simulated"] == 0 and manifest["replay"]["skipped"] > 0
    assert "added_qrels_sha256" in manifest
    assert "added_qrels_sha256" not in json.loads((first / "manifest.json").read_text())


def test_added_qrels_name_the_bad_line(tmp_path: Path) -> None:
    bad = tmp_path / "q.tsv"
    bad.write_text("query-id\tcorpus-id\tscore\n1\tnot-a-doc\t2\n")
    cfg, text = compose(["+experiment=smoke", f"runs_dir={tmp_path}", f"query_set.qrels={bad}"])
    with pytest.raises(DataError, match=r"q.tsv:2: unknown document id 'not-a-doc'"):
        perform_run(cfg, text)


def test_check_min_judged_warns_and_strict_refuses(first: Path, tmp_path: Path) -> None:
    from evidence_bench.gate import main as check

    baseline = tmp_path / "base.yaml"
    assert check([str(first), "--baseline", str(baseline), "--update"]) == 0
    assert check([str(first), "--baseline", str(baseline), "--min-judged", "0"]) == 0
    assert check([str(first), "--baseline", str(baseline), "--min-judged", "1"]) == 0
    strict = [str(first), "--baseline", str(baseline), "--min-judged", "1", "--strict"]
    assert check(strict) == 1


def _toy_collection(root: Path) -> Path:
    """Three queries; only q1 has a document judged relevant (q2's one judgment is a 0)."""
    root.mkdir()
    docs = [{"_id": d, "title": d, "text": f"text of {d}"} for d in ("d1", "d2", "d3")]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    queries = [{"_id": q, "text": f"query {q}"} for q in ("q1", "q2", "q3")]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq2\td2\t0\n")
    return root


def test_queries_without_a_relevant_judgment_are_counted_and_named(tmp_path: Path) -> None:
    from evidence_bench.collections.queryset import unjudged_notice

    conf = {"name": "toy", "path": str(_toy_collection(tmp_path / "toy")), "cassettes": "c"}
    query_set = load_query_set(conf, limit=None)
    assert list(query_set.queries) == ["q1"] and query_set.unjudged == 2
    assert unjudged_notice(query_set) == (
        "note: 2 of the 3 queries of 'toy' left out: no document is judged relevant for them "
        "(add judgments with query_set.qrels)"
    )
    # an added relevant judgment brings q3 back; an added 0 does not bring q2
    added = tmp_path / "mine.tsv"
    added.write_text("query-id\tcorpus-id\tscore\nq3\td3\t1\nq2\td1\t0\n")
    query_set = load_query_set({**conf, "qrels": str(added)}, limit=None)
    assert list(query_set.queries) == ["q1", "q3"] and query_set.unjudged == 1
    assert unjudged_notice(query_set).startswith("note: 1 of the 3 queries of 'toy' left out")
    # a grade the assessor gave above the collection's own sets the scale
    assert query_set.top_grade == 2
    added.write_text("query-id\tcorpus-id\tscore\nq3\td3\t3\n")
    assert load_query_set({**conf, "qrels": str(added)}, limit=None).top_grade == 3
    # none relevant at all: one line that says why
    (tmp_path / "toy" / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td2\t0\n")
    conf = {**conf, "name": "toy-none"}  # (a collection is cached by path and name)
    with pytest.raises(ConfigurationError, match="none of its 3 queries has a document judged"):
        load_query_set(conf, limit=None)


def test_the_run_says_how_many_queries_it_left_out(tmp_path: Path) -> None:
    # CACM: 64 queries, 12 of them without a relevant document (collections/cacm/SOURCE.md)
    overrides = ["+experiment=smoke", "query_set=cacm", "experiment.queries=1"]
    cfg, text = compose([*overrides, f"runs_dir={tmp_path}", "report=false", "progress=false"])
    outcome = perform_run(cfg, text)
    assert outcome.manifest["queries_without_relevant"] == 12
    notice = "note: 12 of the 64 queries of 'cacm' left out: no document is judged relevant"
    assert [line for line in outcome.terminal.splitlines() if line.startswith("note:")] == [
        notice + " for them (add judgments with query_set.qrels)"
    ]


def test_live_results_nobody_judged_are_a_warning_not_an_error(
    recording: list[str], tmp_path: Path
) -> None:
    """Web results are unjudged until someone judges them: a live run still completes, so
    it can be pooled, and says why every score is 0. (From a collection's cassettes the same
    is a mistake, and an error: tests/test_faults.py.)"""
    elsewhere = "query_set.name=elsewhere"  # its documents' host: unlike the recording's
    overrides = ["+experiment=smoke", f"runs_dir={tmp_path}", "progress=false", "report=false"]
    cfg, text = compose([*overrides, *recording, elsewhere])
    outcome = perform_run(cfg, text)
    warning = next(line for line in outcome.terminal.splitlines() if "no retrieved URL" in line)
    assert warning.startswith("warning: no retrieved URL matches a judged document in any of 5")
    assert warning.endswith(
        "every score is 0 until the results are judged (pool the run, judge the pool with "
        "assess, run again with query_set.qrels=FILE)"
    )
    assert build_pool(outcome.path, 10).judged == 0  # the whole top 10 is in the pool


def test_a_run_nobody_judged_says_so_in_its_manifest_report_and_check(
    recording: list[str], first: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its scores are all 0: the manifest keeps why, the report says it in one line above
    everything (escaped), ``check`` warns, and ``check --update`` refuses it as a baseline
    in one line; a run with judged results has no such field (its manifest as it was)."""
    from evidence_bench.gate import main as check

    assert "unjudged_results" not in json.loads((first / "manifest.json").read_text())
    elsewhere = "query_set.name=elsewhere"
    overrides = ["+experiment=smoke", f"runs_dir={tmp_path / 'runs'}", "progress=false"]
    cfg, text = compose([*overrides, *recording, elsewhere])
    run = Path(perform_run(cfg, text, report=new_run_report).path)
    why = json.loads((run / "manifest.json").read_text())["unjudged_results"]
    assert why.startswith("no retrieved URL matches a judged document in any of 5")
    page = (run / "report.html").read_text()
    banner = next(line for line in page.splitlines() if 'id="unjudged-results"' in line)
    assert "Warning: every score is 0." in banner
    assert "every score is 0 until the results are judged" in banner
    assert "e.g. https://" in banner and "<" not in banner.split("</strong>")[1][:-4]
    baseline = tmp_path / "base.yaml"
    capsys.readouterr()
    assert check([str(run), "--baseline", str(baseline), "--update"]) == 2
    err = capsys.readouterr().err
    assert err == f"evidence_bench: check: {run}: not a baseline: {why}\n"
    assert not baseline.exists()
    # a baseline of the same query set (from a copy that does not say so: an older run)
    older = tmp_path / "older"
    shutil.copytree(run, older)
    manifest = json.loads((older / "manifest.json").read_text())
    del manifest["unjudged_results"]
    (older / "manifest.json").write_text(json.dumps(manifest))
    assert check([str(older), "--baseline", str(baseline), "--update"]) == 0
    capsys.readouterr()
    assert check([str(run), "--baseline", str(baseline)]) == 0
    assert f"warning: every score of the run is 0: {why}\n" in capsys.readouterr().err
