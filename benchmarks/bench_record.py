"""What recording with page evidence costs: wall time against CPU time.

    .venv/bin/python benchmarks/bench_record.py [--collection med|npl|cranfield|DIR]
        [--experiment page_evidence] [--keep DIR] [--compare DIR] [OVERRIDE ...]

Records ``--experiment`` (default ``page_evidence``, one job: ``hydra.mode=RUN``) over a
BEIR-layout collection from the simulator on 127.0.0.1, into an empty scratch cassette
directory, in a child process run from a scratch working directory (nothing lands in the
checkout). ``med`` (the default) and ``npl`` are read from ``/work/shared/collections/``
when they are there; otherwise a synthetic collection of their size stands in
(``benchmarks/synthetic.py``, seed 0: MED's 1,033 documents and 30 queries, NPL's 11,429
and 93). ``cranfield`` is the shipped one; a directory is any BEIR collection.

It prints the child's wall and CPU time (user + system) beside the target
``wall <= 2 x CPU + 10 s`` (a recording waits for no page: the simulated timeouts cost no
time, the pages are fetched side by side), the pages recorded and the machine's load
(``uptime``), since the figures are wall times on a shared machine.

``--keep DIR`` keeps the cassettes in DIR; ``--compare DIR`` checks them byte for byte
against another recording of the same experiment and collection (one made by the code
before a change: its numbers must not move), naming the first file that differs; the
search cassettes name the simulator's port, which differs by recording, so they are
compared with it taken out (and the manifest without their sha256s). Extra arguments are
overrides for the recording (``experiment.queries=50``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = Path("/work/shared/collections")
#: A collection by name: its folder, and the size of its synthetic stand-in
PRESETS = {"med": (1_033, 30), "npl": (11_429, 93)}
_PORT = re.compile(rb"127\.0\.0\.1:[0-9]+")


def _collection(choice: str, scratch: Path) -> tuple[Path, str, str]:
    """The collection's folder, its query set name and where it comes from."""
    if choice in PRESETS:
        if (SHARED / choice / "corpus.jsonl").is_file():
            return SHARED / choice, choice, "the shared collection"
        from synthetic import generate

        documents, queries = PRESETS[choice]
        folder = generate(scratch / f"synthetic-{choice}", documents, queries, seed=0)
        return folder, choice, f"synthetic, {choice.upper()}'s size (benchmarks/synthetic.py)"
    if choice == "cranfield":
        return ROOT / "collections" / "cranfield", "cranfield", "shipped"
    folder = Path(choice).resolve()
    return folder, folder.name.lower(), "a BEIR collection"


def _documents(collection: Path) -> int:
    with (collection / "corpus.jsonl").open("rb") as corpus:
        return sum(1 for line in corpus if line.strip())


def _comparable(path: Path) -> bytes:
    """A cassette file's bytes without the simulator's port; the manifest without the search
    cassettes' sha256s, which differ with the port (the page cassette's is kept)."""
    data = _PORT.sub(b"", path.read_bytes())
    if path.name != "@manifest.json":
        return data
    manifest = json.loads(data)
    manifest["cassettes"] = sorted(manifest["cassettes"])
    return json.dumps(manifest, sort_keys=True).encode()


def _differences(mine: Path, other: Path) -> list[str]:
    """The file names that differ between two cassette directories (or are in one only)."""
    names = sorted({p.name for p in mine.glob("*.json")} | {p.name for p in other.glob("*.json")})
    return [
        name
        for name in names
        if not ((mine / name).is_file() and (other / name).is_file())
        or _comparable(mine / name) != _comparable(other / name)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", default="med", help="med, npl, cranfield or a folder")
    parser.add_argument("--experiment", default="page_evidence")
    parser.add_argument("--keep", type=Path, help="keep the cassettes in this directory")
    parser.add_argument("--compare", type=Path, help="a recording to compare byte for byte")
    parser.add_argument("overrides", nargs="*", help="more overrides for the recording")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_record_") as scratch:
        collection, name, origin = _collection(args.collection, Path(scratch))
        cassettes = Path(scratch) / "cassettes"
        command = [
            sys.executable, "-m", "evidence_bench", "record", f"+experiment={args.experiment}",
            "hydra.mode=RUN", "query_set=beir", f"query_set.name={name}",
            f"query_set.path={collection}", f"query_set.cassettes={cassettes}",
            "record_deep=false", "progress=false", *args.overrides,
        ]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            command, cwd=scratch, env=env, capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            print(done.stdout + done.stderr, end="", file=sys.stderr)
            return done.returncode
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        target = 2 * cpu + 10
        pages = json.loads((cassettes / "@pages.json").read_text())["pages"]
        timeouts = sum(1 for page in pages if page.get("error") == "timeout")
        load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout
        print(f"collection      {name}: {_documents(collection):,} documents ({origin})")
        print(f"experiment      {args.experiment} {' '.join(args.overrides)}".rstrip())
        print(f"pages recorded  {len(pages):,} ({timeouts} timeouts)")
        print(f"wall            {wall:.1f} s")
        print(f"CPU             {cpu:.1f} s (user + system)")
        verdict = "met" if wall <= target else "NOT met"
        print(f"target          wall <= 2 x CPU + 10 s = {target:.1f} s: {verdict}")
        print(f"load            {load.strip()}")
        if args.compare is not None:
            differ = _differences(cassettes, args.compare)
            print(
                f"compared        with {args.compare}: "
                + (f"{len(differ)} files differ, first {differ[0]}" if differ else "identical")
            )
        if args.keep is not None:
            shutil.rmtree(args.keep, ignore_errors=True)
            shutil.copytree(cassettes, args.keep)
        return 1 if args.compare is not None and _differences(cassettes, args.compare) else 0


if __name__ == "__main__":
    raise SystemExit(main())
