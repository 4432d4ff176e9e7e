"""Capture three small runs' numbers before the performance refactor (issue 13).

Run from the project root with the code before the refactor (commit 5332362):
``python tests/data/before_refactor/capture.py``; tests/test_before_after.py replays them.
"""

import gzip
import shutil
import tempfile
from pathlib import Path

from evidence_bench.experiment.config import compose
from evidence_bench.experiment.run import perform_run
from evidence_bench.report.tables import summary_rows
from evidence_bench.runs.data import load_run

OUT = Path("tests/data/before_refactor")
RUNS = {
    "sweep": [
        "+experiment=rocchio_sweep",
        "experiment.queries=10",
        "experiment.grid.beta=[0.5,4.0]",
        "experiment.grid.gamma=[0.0,1.0]",
    ],
    "rankers": ["+experiment=ranker_compare", "experiment.queries=6", "query_set=cacm"],
    "users": ["+experiment=policy_compare", "experiment.queries=8", "experiment.rounds=2"],
}


def main() -> None:
    for name, over in RUNS.items():
        with tempfile.TemporaryDirectory() as runs:
            cfg, text = compose([*over, f"runs_dir={runs}", "progress=false", "workers=1"])
            outcome = perform_run(cfg, text)
            path = Path(outcome.path)
            for f in ["per_query.csv", "feedback.csv", "summary.csv", "configs.csv"]:
                with (
                    open(path / f, "rb") as src,
                    gzip.GzipFile(OUT / f"{name}.{f}.gz", "wb", mtime=0) as dst,
                ):
                    shutil.copyfileobj(src, dst)
            table = summary_rows(load_run(path))
            table.to_csv(
                OUT / f"{name}.comparisons.csv.gz",
                index=False,
                float_format="%.10g",
                compression={"method": "gzip", "mtime": 0},
            )
            # rankings: concatenate trec files
            rows = []
            for t in sorted((path / "trec").glob("*")):
                rows.append(
                    f"# {t.name}\n"
                    + (
                        gzip.decompress(t.read_bytes()).decode()
                        if t.suffix == ".gz"
                        else t.read_text()
                    )
                )
            with gzip.GzipFile(OUT / f"{name}.trec.txt.gz", "wb", mtime=0) as dst:
                dst.write("".join(rows).encode())
            print(name, outcome.manifest["episodes"], "episodes")


if __name__ == "__main__":
    main()
