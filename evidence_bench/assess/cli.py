"""The ``pool`` and ``assess`` commands: argument parsing and one-line errors."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from evidence_bench._printable import printable
from evidence_bench.errors import EvidenceBenchError

__all__ = ["assess_command", "assess_parser", "pool_command", "pool_parser"]


def pool_parser() -> argparse.ArgumentParser:
    """``pool``'s options (the CLI reference shows them)."""
    parser = argparse.ArgumentParser(
        prog="evidence-bench pool",
        description="Draw the results of a run that still need judging into a pool file: "
        "the top K of every ranking, deduplicated by canonical URL, minus what is judged.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", type=Path, help="the run to pool")
    parser.add_argument("--depth", type=int, required=True, metavar="K", help="pool depth")
    parser.add_argument(
        "--out", type=Path, required=True, metavar="POOL.jsonl", help="the pool file to write"
    )
    parser.add_argument(
        "--qrels", type=Path, metavar="FILE", help="judgments to leave out too (BEIR or TREC)"
    )
    parser.add_argument(
        "--budget",
        type=int,
        metavar="N",
        help="keep the N results that weigh most in the run's comparisons (MTC order)",
    )
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="the shuffle's seed")
    return parser


def assess_parser() -> argparse.ArgumentParser:
    """``assess``'s options (the CLI reference shows them)."""
    parser = argparse.ArgumentParser(
        prog="evidence-bench assess",
        description="Serve a page on 127.0.0.1 for judging a pool by keyboard; every "
        "judgment is saved to QRELS.tsv at once (BEIR layout), and a rerun reads it with "
        "query_set.qrels=QRELS.tsv.",
    )
    parser.add_argument("pool", metavar="POOL.jsonl", type=Path, help="written by pool")
    parser.add_argument(
        "--qrels", type=Path, required=True, metavar="QRELS.tsv", help="where judgments go"
    )
    parser.add_argument("--port", type=int, default=0, metavar="P", help="0: any free port")
    parser.add_argument("--assessor", metavar="NAME", help="written to the log (default: you)")
    return parser


def _fail(command: str, message: str, code: int = 1) -> None:
    print(printable(f"evidence_bench: {command}: {message}"), file=sys.stderr)
    raise SystemExit(code)


def pool_command(argv: list[str]) -> None:
    """``pool RUN_DIR --depth K --out POOL.jsonl [--qrels FILE] [--budget N] [--seed S]``."""
    args = pool_parser().parse_args(argv)
    from evidence_bench.experiment.pool import build_pool, write_pool

    try:
        pool = build_pool(
            args.run_dir, args.depth, qrels=args.qrels, budget=args.budget, seed=args.seed
        )
        write_pool(args.out, pool)
    except EvidenceBenchError as exc:
        _fail("pool", str(exc))
    queries = len({item.query_id for item in pool.items})
    cut = f", {pool.cut} left out by --budget" if pool.cut else ""
    print(
        f"pool: {len(pool.items)} results of {queries} queries to judge (top {pool.depth} of "
        f"{pool.rankings} rankings; {pool.judged} judged already{cut}) in {args.out}"
    )


def assess_command(argv: list[str]) -> None:
    """``assess POOL.jsonl --qrels QRELS.tsv [--port P] [--assessor NAME]``."""
    args = assess_parser().parse_args(argv)
    from evidence_bench.assess.judgments import Judgments
    from evidence_bench.assess.server import LOOPBACK, Assessment, make_server
    from evidence_bench.experiment.pool import read_pool

    if not 0 <= args.port <= 65535:
        _fail("assess", f"--port {args.port}: not a port (0-65535)", 2)
    try:
        items = read_pool(args.pool)
        if not items:
            _fail("assess", f"{args.pool}: the pool is empty: nothing to judge")
        judgments = Judgments(args.qrels, args.assessor or _user())
        server = make_server(Assessment(items, judgments), args.port)
    except EvidenceBenchError as exc:
        _fail("assess", str(exc))
    except OSError as exc:
        _fail("assess", f"cannot listen on {LOOPBACK}:{args.port}: {exc.strerror or exc}")
    port = server.server_address[1]
    left = sum(1 for item in items if judgments.grade(item.query_id, item.doc_id) is None)
    print(
        f"assess: {left} of {len(items)} results to judge; judgments go to {args.qrels}\n"
        f"assess: open http://{LOOPBACK}:{port}/ (Ctrl-C to stop; nothing is lost)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("assess: stopped; every judgment is saved", file=sys.stderr)
    finally:
        server.server_close()


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"
