"""Bad input and faults, as a hostile user would make them (issue 14): each row is a
``python -m evidence_bench`` command, the one line it must print on stderr, and its exit
status (1: the input or the environment is at fault; no traceback, nothing half-written).

A row runs in a real process where the process is what is tested (a file size limit, an
error travelling from worker processes to the parent); the others run ``main`` in this
process, which answers the same (test_main.py runs the command line itself, too).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fault_fixtures import (
    ROOT,
    cli,
    copy_cassettes,
    edit_cassette,
    main_in_process,
    one_line,
    serve_bytes,
    smoke_args,
)


@dataclass
class Invocation:
    args: list[str]
    module: str = "evidence_bench"
    file_size_limit: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: run a fresh ``python -m`` process (always with a file size limit)
    fresh: bool = False
    #: after the process: what must (not) be on disk
    check: Callable[[], None] = lambda: None


def _escaped(tmp: Path) -> Invocation:
    runs = tmp / "a" / "runs"
    outside = (runs / "../../escaped").resolve()

    def nothing_outside() -> None:
        assert not outside.exists()
        assert not (tmp / "a" / "runs").exists() or not any((tmp / "a" / "runs").rglob("*"))

    return Invocation(smoke_args(runs, "experiment.name=../../escaped"), check=nothing_outside)


def _escaped_multirun(tmp: Path) -> Invocation:
    runs = tmp / "a" / "runs"
    outside = (runs / "../../escaped").resolve()
    args = smoke_args(runs, "experiment.name=../../escaped", "ranker.beta=0.25,0.75")
    return Invocation(
        ["run", "--multirun", *args[1:]], check=lambda: _assert_absent(outside, tmp / "a")
    )


def _assert_absent(*paths: Path) -> None:
    for path in paths:
        assert not path.exists(), path


def _name(value: str) -> Callable[[Path], Invocation]:
    return lambda tmp: Invocation(smoke_args(tmp / "runs", f"experiment.name={value}"))


def _latest_is_a_directory(tmp: Path) -> Invocation:
    latest = tmp / "runs" / "smoke" / "latest"
    latest.mkdir(parents=True)

    def untouched() -> None:  # refused before computing: no run, no reservation, no staging
        assert sorted(p.name for p in latest.parent.iterdir()) == ["latest"]

    return Invocation(smoke_args(tmp / "runs"), check=untouched)


def _runs_dir_under_a_file(tmp: Path) -> Invocation:
    (tmp / "file").write_text("not a directory\n")
    return Invocation(smoke_args(tmp / "file" / "runs"))


def _read_only_runs_dir(tmp: Path) -> Invocation:
    runs = tmp / "runs"
    runs.mkdir()
    runs.chmod(0o555)
    return Invocation(smoke_args(runs), check=lambda: runs.chmod(0o755))


def _big_grade(grade: str) -> Callable[[Path], Invocation]:
    def build(tmp: Path) -> Invocation:
        collection = tmp / "cranfield"
        shutil.copytree(ROOT / "collections" / "cranfield", collection)
        qrels = collection / "qrels.tsv"
        lines = qrels.read_text().splitlines()
        query_id, doc_id, _ = lines[1].split("\t")
        lines[1] = f"{query_id}\t{doc_id}\t{grade}"
        qrels.write_text("\n".join(lines) + "\n")
        return Invocation(
            smoke_args(
                tmp / "runs",
                "query_set=beir",
                "query_set.name=cranfield",
                f"query_set.path={collection}",
                "query_set.cassettes=cassettes/cranfield",
            )
        )

    return build


def _recorded_status(status: int, *, fresh: bool = False) -> Callable[[Path], Invocation]:
    """A cassette that holds a recorded error answer (blessed in the manifest), replayed by
    two workers: the error travels from a worker to the parent, which must not hang."""

    def build(tmp: Path) -> Invocation:
        cassettes = copy_cassettes(tmp / "cassettes")

        def fail(response: dict[str, object]) -> None:
            response["status"] = {"code": status, "message": "error"}

        edit_cassette(cassettes, "1", fail)
        return Invocation(
            smoke_args(tmp / "runs", f"query_set.cassettes={cassettes}", "workers=2"),
            check=lambda: _assert_absent(*(tmp / "runs" / "smoke").glob("2*")),
            fresh=fresh,
        )

    return build


def _header_not_text(tmp: Path) -> Invocation:
    """Not an error of the package: httpx refuses the replayed header in a worker."""
    cassettes = copy_cassettes(tmp / "cassettes")

    def break_header(response: dict[str, object]) -> None:
        response["headers"] = {"content-type": [123]}

    edit_cassette(cassettes, "2", break_header)
    return Invocation(smoke_args(tmp / "runs", f"query_set.cassettes={cassettes}", "workers=2"))


def _damaged(content: bytes) -> Callable[[Path], Invocation]:
    def build(tmp: Path) -> Invocation:
        cassettes = copy_cassettes(tmp / "cassettes")
        (cassettes / "3.json").write_bytes(content)
        # on_miss=simulate (the default) would simulate a missing cassette; a damaged one
        # stops the run whatever on_miss says
        return Invocation(smoke_args(tmp / "runs", f"query_set.cassettes={cassettes}"))

    return build


def _disk_full_during_run(tmp: Path) -> Invocation:
    runs = tmp / "runs"

    def nothing_kept() -> None:
        left = sorted(p.name for p in (runs / "smoke").iterdir())
        assert left == [], left

    # documents.jsonl and per_query.csv of a smoke run are over 64 KB; config.yaml is not
    return Invocation(smoke_args(runs), file_size_limit=64 * 1024, check=nothing_kept)


def _param(name: str, build: Callable[[Path], Invocation], message: str, **kw: object) -> object:
    return pytest.param(build, message, id=name, **kw)


CASES = [
    # item 9: keys and values the schemas let through
    _param("unknown top key", lambda t: Invocation(smoke_args(t, "+bogus_key=1")),
           "bogus_key: unknown config key (valid: query_set, ranker,"),
    _param("unknown ranker key", lambda t: Invocation(smoke_args(t, "+ranker.foo=1")),
           "ranker.foo: unknown config key (valid: name, _target_, alpha,"),
    _param("unknown policy key", lambda t: Invocation(smoke_args(t, "+policies.oracle.foo=1")),
           "policies.oracle.foo: unknown config key (valid: kind,"),
    _param("negative workers", lambda t: Invocation(smoke_args(t, "workers=-1")),
           "workers=-1 must be between 0 and 256 (0: one per core)"),
    # item 8: the experiment's name is one directory under runs_dir
    _param("name escapes runs_dir", _escaped, "experiment.name='../../escaped' must be one"),
    _param("name escapes in a multirun", _escaped_multirun, "experiment.name='../../escaped'"),
    _param("name with a slash", _name("a/b"), "experiment.name='a/b' must be one plain"),
    _param("name is ..", _name(".."), "experiment.name='..' must be one plain directory name"),
    _param("name is hidden", _name(".hidden"), "experiment.name='.hidden' must be one plain"),
    # item 9: where the run goes, checked before anything is computed
    _param("latest is a real directory", _latest_is_a_directory,
           "smoke/latest is a real directory, not the symlink to the newest run"),
    _param("runs_dir under a file", _runs_dir_under_a_file, "cannot write runs under"),
    _param("read-only runs_dir", _read_only_runs_dir, "Permission denied (check runs_dir)",
           marks=pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")),
    _param("disk full during a run", _disk_full_during_run, "could not write the run"),
    # item 9: qrels grades
    _param("grade beyond an int", _big_grade("99999999999999999999"),
           "qrels.tsv:2: score 99999999999999999999 is out of range (a relevance grade"),
    _param("grade of 5000 digits", _big_grade("7" * 5000), "qrels.tsv:2: score 777777"),
    # item 7: a query set named unlike the collection its cassettes were recorded from
    _param("name unlike the cassettes' collection",
           lambda t: Invocation(smoke_args(t, "query_set.name=probe")),
           "no retrieved URL matches a judged document in any of 5 queries replayed from "
           "cassettes/cranfield (retrieved e.g. https://cranfield.evidence-bench.test/doc/"),
    # item 2: a worker's error reaches the parent, which ends the run (no hang)
    _param("recorded 500, two workers", _recorded_status(500, fresh=True),
           "cassettes/1.json): Brave answered HTTP 500 (no error body)"),
    _param("recorded 429, two workers", _recorded_status(429),
           "cassettes/1.json): Brave answered HTTP 429 (no error body)"),
    _param("bug in a worker", _header_not_text,
           "query '2' failed: TypeError: Header value must be str or bytes"),
    # item 5: damaged cassettes stop the run whatever on_miss says (the default: simulate)
    _param("empty cassette", _damaged(b""), "3.json is damaged (not valid JSON"),
    _param("binary cassette", _damaged(bytes(range(256))), "3.json is damaged (not UTF-8"),
    _param("gzip garbage cassette", _damaged(b"\x1f\x8b\x08\x00garbage"), "3.json is damaged"),
    _param("truncated cassette",
           _damaged((ROOT / "cassettes/cranfield/3.json").read_bytes()[:999]),
           "3.json is damaged (not valid JSON"),
    _param("wrong-schema cassette", _damaged(b'{"interactions": [{"request": {}}]}\n'),
           "3.json is damaged (interactions[0].request lacks a method and uri)"),
]  # fmt: skip


@pytest.mark.parametrize(("build", "message"), CASES)
def test_bad_input_and_faults_end_in_one_line_and_exit_1(
    build: Callable[[Path], Invocation],
    message: str,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    invocation = build(tmp_path)
    if invocation.fresh or invocation.file_size_limit or invocation.module != "evidence_bench":
        done = cli(
            *invocation.args,
            module=invocation.module,
            file_size_limit=invocation.file_size_limit,
            env=invocation.env,
            timeout=180,  # a regression that hangs fails here instead of hanging the suite
        )
    else:
        for name, value in invocation.env.items():
            monkeypatch.setenv(name, value)
        done = main_in_process(*invocation.args, capfd=capfd, monkeypatch=monkeypatch)
    line = one_line(done)
    assert done.returncode == 1, done.stderr
    assert message in line
    assert line.startswith("evidence_bench: ")
    invocation.check()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "is JSON nested too deeply to read"),
        (b'{"web": {"results": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "nested too deeply"),
    ],
    ids=["deep array", "deep results"],
)
def test_deeply_nested_json_from_a_server_is_one_line(body: bytes, message: str) -> None:
    with serve_bytes(lambda request: (200, {"Content-Type": "application/json"}, body)) as url:
        done = cli(
            "jaguar",
            module="evidence_bench.cli",
            env={"BRAVE_SEARCH_API_KEY": "k", "BRAVE_SEARCH_BASE_URL": url},
            timeout=60,
        )
    line = one_line(done)
    assert done.returncode == 1
    assert line.startswith("evidence-fetcher: ") and message in line


def test_the_manifest_of_a_run_names_the_cassette_manifest_hash(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renamed manifest (@manifest.json) is still what a run's provenance hashes."""
    done = main_in_process(*smoke_args(tmp_path / "runs"), capfd=capfd, monkeypatch=monkeypatch)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "runs" / "smoke" / "latest" / "manifest.json").read_text())
    shipped = ROOT / "cassettes" / "cranfield" / "@manifest.json"
    import hashlib

    assert manifest["cassette_manifest_sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest()
