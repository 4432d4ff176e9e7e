"""Shards (``shards=N shard=i``): the slices, a shard's run, and the run gathered from its
shards, which must be the unsharded run file for file; then the same through Hydra's joblib,
Ray and submitit launchers."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.experiment.config import compose
from evidence_bench.experiment.gather import gather_shards
from evidence_bench.experiment.plan import plan_run
from evidence_bench.experiment.run import perform_run
from evidence_bench.experiment.rundir import write_csv
from evidence_bench.experiment.shards import shard_slice
from evidence_bench.report.fresh import new_run_report
from tests.conftest import exported
from tests.fault_fixtures import main_in_process

ROOT = Path(__file__).resolve().parents[1]
#: The manifest entries a gathered run may differ in from the unsharded run, and no other.
VOLATILE = {"created", "run_id", "wall_time_s", "episodes_time_s", "gathered"}
DATA_FILES = (
    "config.yaml", "scores.parquet", "summary.parquet", "configs.csv", "feedback.parquet",
    "episodes.parquet", "rankings.parquet", "runs.parquet", "trec_qrels.parquet",
    "documents.jsonl", "qrels.csv", "queries.csv",
)  # fmt: skip


# --- the slices ------------------------------------------------------------------------------


def test_shards_are_contiguous_slices_the_first_ones_a_query_longer() -> None:
    ids = [str(n) for n in range(1, 11)]
    # 10 queries in 4 shards: 10 = 3 + 3 + 2 + 2, as numpy.array_split(range(10), 4) cuts
    assert [shard_slice(ids, 4, i) for i in range(4)] == [
        ["1", "2", "3"], ["4", "5", "6"], ["7", "8"], ["9", "10"],
    ]  # fmt: skip
    assert shard_slice(ids, 1, 0) == ids
    assert [shard_slice(ids, 10, i) for i in (0, 9)] == [["1"], ["10"]]


@given(queries=st.integers(1, 60), shards=st.integers(1, 60))
def test_the_slices_put_together_are_the_queries_in_order(queries: int, shards: int) -> None:
    ids = [f"q{n:03d}" for n in range(queries)]
    if shards > queries:
        with pytest.raises(ConfigurationError, match=f"shards={shards}: the run has {queries}"):
            shard_slice(ids, shards, 0)
        return
    slices = [shard_slice(ids, shards, i) for i in range(shards)]
    assert [qid for part in slices for qid in part] == ids
    sizes = [len(part) for part in slices]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] - sizes[-1] <= 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["shards=0"], "shards=0 must be between 1 and 1000"),
        (["shards=2", "shard=2"], "shard=2 must be between 0 and 1 (shards=2)"),
        (["shard=1"], "shard=1 must be between 0 and 0 (shards=1)"),
        (["shards=3", "shard=-1"], "shard=-1 must be between 0 and 2 (shards=3)"),
    ],
)
def test_a_bad_shard_is_one_line_naming_the_key(extra: list[str], message: str) -> None:
    cfg, _ = compose(["+experiment=smoke", *extra])
    with pytest.raises(ConfigurationError) as caught:
        plan_run(cfg)
    assert str(caught.value) == message


def test_more_shards_than_queries_fails_before_anything_is_written(tmp_path: Path) -> None:
    cfg, text = compose(["+experiment=smoke", f"runs_dir={tmp_path}", "shards=6", "shard=0"])
    with pytest.raises(ConfigurationError, match="shards=6: the run has 5 queries"):
        perform_run(cfg, text)
    assert not any(tmp_path.rglob("manifest.json"))


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=30))
def test_a_shards_values_read_back_exactly(values: list[float]) -> None:
    """A shard writes every float's shortest repr; the gather reads it back to the same float
    (a summary of values cut to 10 digits could differ from the unsharded run's)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "per_query.csv"
        write_csv(path, pd.DataFrame({"value": values}), exact=True)
        back = [float(v) for v in path.read_text().splitlines()[1:]]  # as the gather reads
    assert back == values


def test_ten_digits_would_not_be_exact(tmp_path: Path) -> None:
    value = 0.12345678901234567
    write_csv(tmp_path / "cut.csv", pd.DataFrame({"value": [value]}))
    write_csv(tmp_path / "exact.csv", pd.DataFrame({"value": [value]}), exact=True)
    assert (tmp_path / "cut.csv").read_text() == "value\n0.123456789\n"
    assert (tmp_path / "exact.csv").read_text() == "value\n0.12345678901234566\n"


# --- a sharded run, gathered, is the unsharded run --------------------------------------------


def files(run: Path) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def manifest(run: Path) -> dict[str, object]:
    data = json.loads((run / "manifest.json").read_text())
    assert isinstance(data, dict)
    return data


def masked_report(run: Path) -> str:
    """report.html without what differs between two runs of the same config: the run id,
    its time and its wall time."""
    m = manifest(run)
    html = (run / "report.html").read_text()
    html = html.replace(str(m["run_id"]), "RUN-ID").replace(str(m["created"]), "CREATED")
    wall = f" · {float(m['wall_time_s']):.1f} s</dd>"  # type: ignore[arg-type]
    assert wall in html
    return html.replace(wall, " · WALL s</dd>")


def stored_key(run: Path) -> dict[str, object]:
    """The key of the run's stored analysis, without the manifest's hash (which differs as
    the manifest does)."""
    with gzip.open(run / "analysis.json.gz", "rt", encoding="utf-8") as lines:
        key = json.loads(lines.readline())
    assert isinstance(key, dict)
    key["inputs"].pop("manifest.json")
    return key


def assert_same_run(gathered: Path, whole: Path) -> None:
    """Every file byte for byte, but the manifest (only VOLATILE entries differ), the report
    (only the run id, time and wall time) and its stored analysis (the same key but for the
    manifest's hash; what it shows is the report's)."""
    mine, theirs = files(gathered), files(whole)
    assert sorted(mine) == sorted(theirs)
    assert set(DATA_FILES) <= set(mine)
    for name in mine:
        if name not in ("manifest.json", "report.html", "analysis.json.gz"):
            assert mine[name] == theirs[name], name
    a, b = manifest(gathered), manifest(whole)
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    # two runs in the same second have the same ``created`` (and may take as long)
    assert "gathered" in differ and "run_id" in differ and differ <= VOLATILE, differ
    if "report.html" in mine:
        assert masked_report(gathered) == masked_report(whole)
        assert stored_key(gathered) == stored_key(whole)


def run_in_process(*overrides: str) -> Path:
    cfg, text = compose(list(overrides))
    return perform_run(cfg, text, report=new_run_report).path


#: (name, overrides, shards): Cranfield with two configs, oracle and noisy users, two rounds,
#: 7 queries in 3 uneven shards; CACM's first 5 queries in 2.
CASES = {
    "cranfield": (
        ["+experiment=ci", "experiment.queries=7", "+experiment.grid.beta=[0.25,0.75]"],
        3,
    ),
    "cacm": (["+experiment=smoke", "query_set=cacm"], 2),
}


class Sharded:
    def __init__(self, root: Path, whole: Path, shards: list[Path], gathered: Path) -> None:
        self.root, self.whole, self.shards, self.gathered = root, whole, shards, gathered


@pytest.fixture(scope="module", params=sorted(CASES))
def sharded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Sharded:
    base, count = CASES[request.param]
    root = tmp_path_factory.mktemp(f"shards-{request.param}")
    common = [*base, f"runs_dir={root}", "workers=1", "progress=false"]
    whole = run_in_process(*common)
    shards = [run_in_process(*common, f"shards={count}", f"shard={i}") for i in range(count)]
    gathered = gather_shards(list(reversed(shards)), report=new_run_report).path  # any order given
    return Sharded(root, whole, shards, gathered)


def test_the_gathered_run_is_the_unsharded_run(sharded: Sharded) -> None:
    assert_same_run(sharded.gathered, sharded.whole)
    assert sharded.gathered.parent == sharded.whole.parent
    assert (sharded.whole.parent / "latest").resolve() == sharded.gathered.resolve()
    listed = manifest(sharded.gathered)["gathered"]
    assert isinstance(listed, dict)
    assert [s["path"] for s in listed["shards"]] == [str(p) for p in sharded.shards]


def test_each_shard_holds_its_slice_and_is_marked(sharded: Sharded) -> None:
    whole = pd.read_csv(sharded.whole / "queries.csv", dtype=str)["query_id"].tolist()
    count = len(sharded.shards)
    for index, shard in enumerate(sharded.shards):
        entry = manifest(shard)["shard"]
        expected = shard_slice(whole, count, index)
        assert entry == {"index": index, "count": count, "queries": len(expected), "of": len(whole)}
        csv = exported(shard, "csv", out=shard.parent / f"{shard.name}-csv")
        per_query = pd.read_csv(csv / "per_query.csv", dtype={"query_id": str})
        assert list(dict.fromkeys(per_query["query_id"])) == expected
        assert not (shard / "report.html").exists()  # partial numbers: no report of its own


def test_summary_and_label_counts_come_from_every_query_not_from_shard_means(
    sharded: Sharded,
) -> None:
    # the shards' mean nDCG@10 of the first stage, per shard, and the whole run's
    def initial(run: Path) -> pd.Series:
        summary = pd.read_csv(
            exported(run, "csv", out=run.parent / f"{run.name}-csv") / "summary.csv"
        )
        cell = summary[
            (summary["stage"] == "initial") & (summary["eval_mode"] == "full")
            & (summary["measure"] == "nDCG@10") & (summary["round"] == 0)
        ]  # fmt: skip
        return cell.iloc[0]

    parts = [initial(s) for s in sharded.shards]
    whole = initial(sharded.gathered)
    assert whole["n"] == sum(p["n"] for p in parts)
    assert whole["mean"] == pytest.approx(sum(p["mean"] * p["n"] for p in parts) / whole["n"])
    assert whole["mean"] != pytest.approx(sum(p["mean"] for p in parts) / len(parts), abs=1e-9)

    def relevant(run: Path) -> int:
        labels = manifest(run)["labels"]
        assert isinstance(labels, dict)
        return sum(c["relevant"] for c in labels["counts"] if c["round"] == 1)

    assert relevant(sharded.gathered) == sum(relevant(s) for s in sharded.shards) > 0


# --- a gather that cannot be done says which shard -------------------------------------------


def _edit_json(path: Path, **entries: object) -> None:
    data = json.loads(path.read_text())
    for dotted, value in entries.items():
        node = data
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def cranfield(tmp_path_factory: pytest.TempPathFactory) -> Sharded:
    """Cranfield's first 6 queries in 3 shards, and shard 1 again with seed=1."""
    root = tmp_path_factory.mktemp("shards-errors")
    common = ["+experiment=ci", "experiment.queries=6", "experiment.rounds=1",
              f"runs_dir={root}", "workers=1", "progress=false", "report=false"]  # fmt: skip
    shards = [run_in_process(*common, "shards=3", f"shard={i}") for i in range(3)]
    other_seed = run_in_process(*common, "shards=3", "shard=1", "seed=1")
    whole = run_in_process(*common)
    return Sharded(root, whole, [*shards, other_seed], whole)


def copy(run: Path, tmp_path: Path, name: str) -> Path:
    return Path(shutil.copytree(run, tmp_path / name))


def test_a_missing_shard_is_named(cranfield: Sharded) -> None:
    s0, _, s2, _ = cranfield.shards
    with pytest.raises(DataError) as caught:
        gather_shards([s0, s2])
    assert str(caught.value) == (
        f"shard 1 of 3 missing in {s0}, {s2} (found 0, 2); run it with shards=3 shard=N"
    )


def test_a_duplicated_shard_is_named(cranfield: Sharded, tmp_path: Path) -> None:
    s0, s1, s2, _ = cranfield.shards
    again = copy(s1, tmp_path, "again")
    with pytest.raises(DataError) as caught:
        gather_shards([s0, s1, again, s2])
    assert str(caught.value) == f"shard 1 of 3 appears twice: {s1} and {again}"


def test_a_shard_with_another_seed_is_named_with_the_key(cranfield: Sharded) -> None:
    s0, _, s2, other_seed = cranfield.shards
    with pytest.raises(DataError) as caught:
        gather_shards([s0, other_seed, s2])
    assert str(caught.value) == (
        f"shard 1 ({other_seed}): its config differs from shard 0's at seed (1, not 0)"
    )


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            {"shard__count": 4},
            "shard 1 ({path}) is one of 4 shards, shard 0 ({s0}) one of 3",
        ),
        (
            {"git_commit": "0" * 40},
            "shard 1 ({path}): git_commit '{zeros}' differs from shard 0's '{commit}'",
        ),
        (
            {"collection_checksum": "x"},
            "shard 1 ({path}): collection_checksum 'x' differs from shard 0's '{checksum}'",
        ),
    ],
)
def test_a_shard_from_another_split_code_or_collection_is_named(
    cranfield: Sharded, tmp_path: Path, edit: dict[str, object], message: str
) -> None:
    s0, s1, s2, _ = cranfield.shards
    changed = copy(s1, tmp_path, "changed")
    _edit_json(changed / "manifest.json", **edit)
    with pytest.raises(DataError) as caught:
        gather_shards([s0, changed, s2])
    first = manifest(s0)
    assert str(caught.value) == message.format(
        path=changed, s0=s0, zeros="0" * 40, commit=first["git_commit"],
        checksum=first["collection_checksum"],
    )  # fmt: skip


def test_a_shard_without_its_slices_queries_is_named(cranfield: Sharded, tmp_path: Path) -> None:
    s0, s1, s2, _ = cranfield.shards
    changed = copy(s1, tmp_path, "changed")
    queries = (changed / "queries.csv").read_text().splitlines(keepends=True)
    (changed / "queries.csv").write_text("".join(queries[:-1]))
    with pytest.raises(DataError) as caught:
        gather_shards([s0, changed, s2])
    assert str(caught.value) == (
        f"shard 1 ({changed}): holds 1 queries, not the 2 of slice 1 of 3 of this run's "
        "6 (first '3' .. last '4')"
    )


def test_a_run_that_is_no_shard_is_named(cranfield: Sharded) -> None:
    with pytest.raises(DataError, match=r"^.*: not a shard \(its manifest.json has no 'shard'"):
        gather_shards([cranfield.whole])


def test_a_failed_gather_writes_nothing(cranfield: Sharded) -> None:
    before = sorted(p.name for p in (cranfield.root / "ci").iterdir())
    s0, _, s2, _ = cranfield.shards
    with pytest.raises(DataError):
        gather_shards([s0, s2])
    assert sorted(p.name for p in (cranfield.root / "ci").iterdir()) == before


# --- the command line and Hydra's launchers ---------------------------------------------------


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "evidence_bench", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_gather_on_the_command_line(
    cranfield: Sharded, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    s0, s1, s2, _ = cranfield.shards
    # the refusal is the command's answer (main in this process); the gather a real process
    done = main_in_process("gather", str(s0), str(s2), capfd=capfd, monkeypatch=monkeypatch)
    assert done.returncode == 1
    assert done.stderr == (
        f"evidence_bench: gather: shard 1 of 3 missing in {s0}, {s2} (found 0, 2); "
        "run it with shards=3 shard=N\n"
    )
    done = cli("gather", str(s2), str(s1), str(s0))
    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stdout.splitlines() if line.startswith("run: ")]
    assert_same_run(Path(line.removeprefix("run: ")), cranfield.whole)


#: A small run for the launchers: Cranfield's first 8 queries, two users, two rounds.
SMALL = ["+experiment=ci", "experiment.queries=8", "workers=1", "progress=false"]


def gathered_path(done: subprocess.CompletedProcess[str]) -> Path:
    assert done.returncode == 0, done.stderr[-3000:]
    runs = [
        line.removeprefix("run: ") for line in done.stdout.splitlines() if line.startswith("run: ")
    ]
    return Path(runs[-1])  # the jobs print theirs first; the gathered run is last


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The small run unsharded (in this process: the reference, whose process is not under
    test; a run's files are the same in any process) and gathered from 2 shards run by the
    joblib launcher."""
    runs = tmp_path_factory.mktemp("launched")
    typed = [*SMALL, f"runs_dir={runs}"]
    cfg, text = compose(typed)
    whole = perform_run(
        cfg, text, overrides=typed, report=new_run_report
    ).path  # as `run` records them
    joblib = gathered_path(
        cli("run", "--multirun", *SMALL, f"runs_dir={runs}", "shards=2", "shard=range(2)",
            "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
            f"hydra.sweep.dir={runs}/ci/multirun-joblib")
    )  # fmt: skip
    return {"runs": runs, "whole": whole, "joblib": joblib}


@pytest.mark.slow
def test_a_joblib_multirun_over_the_shards_gathers_the_unsharded_run(
    launched: dict[str, Path],
) -> None:
    assert_same_run(launched["joblib"], launched["whole"])
    # the overrides as typed (the jobs record Hydra's rendering), without the shards'
    assert manifest(launched["joblib"])["overrides"] == [*SMALL, f"runs_dir={launched['runs']}"]
    jobs = sorted((launched["runs"] / "ci" / "multirun-joblib").glob("*/run/manifest.json"))
    assert [manifest(p.parent)["shard"]["index"] for p in jobs] == [0, 1]  # type: ignore[index]
    assert (launched["runs"] / "ci" / "latest").resolve() == launched["joblib"].resolve()


def _listening(pids: set[int]) -> list[str]:
    """The local addresses at which any of ``pids`` listens (TCP, IPv4 and IPv6), read from
    /proc so that no tool is needed."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue  # the process ended meanwhile
    addresses = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                addresses.append(fields[1])
    return addresses


def _loopback(address: str) -> bool:
    """``0100007F:port`` (127.0.0.1) or its IPv6 forms (::1, ::ffff:127.0.0.1)."""
    host = address.split(":")[0]
    if len(host) == 8:
        return host.endswith("7F")  # little-endian: 127.x.x.x
    return host in ("00000000000000000000000001000000", "0000000000000000FFFF00000100007F")


def _group(pgid: int) -> set[int]:
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getpgid(int(entry.name)) == pgid:
                    pids.add(int(entry.name))
            except OSError:
                continue
    return pids


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: Ray binds where its node address is; it replaces a loopback --node-ip-address with the
#: machine's own address unless this is set (ray/_private/services.py, get_node_ip_address).
RAY_LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}


@pytest.fixture
def ray_cluster(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A Ray head on 127.0.0.1 with 2 CPUs and no dashboard: its address and process group.

    ``ray start --block`` runs in a process group of its own, so teardown ends exactly the
    processes it started (``ray stop`` would end every Ray process on the machine)."""
    pytest.importorskip("ray", reason="the [ray] extra is not installed")
    pytest.importorskip(
        "hydra_plugins.hydra_ray_launcher", reason="the [ray] extra is not installed"
    )
    port = _free_port()
    ray = Path(sys.executable).with_name("ray")
    temp = Path(f"/tmp/eb-ray-{os.getpid()}")  # short: Ray's socket paths have a length limit
    log = (tmp_path / "ray.log").open("w")
    head = subprocess.Popen(
        [str(ray), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats",
         f"--temp-dir={temp}", "--block"],
        stdout=log, stderr=subprocess.STDOUT,
        env={**os.environ, **RAY_LOOPBACK}, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in (tmp_path / "ray.log").read_text():
            assert head.poll() is None, (tmp_path / "ray.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "ray start did not finish in 120 s"
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", head.pid
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10  # Ray's own shutdown can take longer than that
        while _group(head.pid) and time.monotonic() < deadline:
            head.poll()
            time.sleep(0.5)
        if _group(head.pid):
            os.killpg(head.pid, signal.SIGKILL)
        head.wait(timeout=30)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
def test_a_ray_multirun_over_the_shards_gathers_the_unsharded_run(
    ray_cluster: tuple[str, int], launched: dict[str, Path]
) -> None:
    """hydra/launcher=ray against a real local cluster: the same files as the joblib run's
    and the unsharded run's, and nothing of Ray's listens beyond 127.0.0.1."""
    address, group = ray_cluster
    listening = _listening(_group(group))
    assert listening and all(_loopback(a) for a in listening), listening
    done = cli(
        "run", "--multirun", *SMALL, f"runs_dir={launched['runs']}", "shards=2",
        "shard=range(2)", "hydra/launcher=ray", f"hydra.launcher.ray.init.address={address}",
        # hydra-ray-launcher 1.2.2 adds object_store_memory to ray.init, which Ray refuses
        # when it connects to a running cluster; null keeps it out
        "+hydra.launcher.ray.init.object_store_memory=null",
        f"hydra.sweep.dir={launched['runs']}/ci/multirun-ray",
        env=RAY_LOOPBACK,
    )  # fmt: skip
    gathered = gathered_path(done)
    assert_same_run(gathered, launched["whole"])
    assert_same_run(gathered, launched["joblib"])
    assert "Connected to Ray cluster" in done.stderr + done.stdout


@pytest.mark.slow
def test_a_submitit_local_multirun_over_the_shards_gathers_the_unsharded_run(
    launched: dict[str, Path],
) -> None:
    pytest.importorskip(
        "hydra_plugins.hydra_submitit_launcher", reason="the [slurm] extra is not installed"
    )
    done = cli(
        "run", "--multirun", *SMALL, f"runs_dir={launched['runs']}", "shards=2",
        "shard=range(2)", "hydra/launcher=submitit_local",
        f"hydra.sweep.dir={launched['runs']}/ci/multirun-submitit",
    )  # fmt: skip
    assert_same_run(gathered_path(done), launched["whole"])


def test_the_manual_says_how_to_shard_and_where_to_run_shards() -> None:
    readme = (ROOT / "docs" / "tutorials" / "ray.rst").read_text()
    for text in ("shards=4 'shard=range(4)'", "hydra/launcher=ray",
                 "hydra.launcher.ray.init.address=", "hydra/launcher=submitit_slurm",
                 "python -m evidence_bench gather"):  # fmt: skip
        assert text in readme, text
    assert re.search(r"contiguous", readme)
