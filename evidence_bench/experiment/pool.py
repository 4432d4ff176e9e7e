"""The judging pool of a run: what to judge next, one result per row of ``POOL.jsonl``.

TREC depth-k pooling over every ranking of the run, deduplicated by canonical URL, minus
what is judged already, in a seeded shuffle. ``budget`` orders it by MTC's weights for
DCG (Carterette, Allan & Sitaraman, SIGIR 2006): a document's weight is the sum, over the
run's comparisons of a feedback stage with its control, of the absolute difference of its
discounts, ``|1/log2(1 + rank_A) - 1/log2(1 + rank_B)|`` (docs/tutorials/judge.rst).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from evidence_bench._atomic import write_atomic
from evidence_bench.collections.beir import is_web_id, read_judgments
from evidence_bench.errors import ConfigurationError, DataError
from evidence_bench.evidence import canonical_url
from evidence_bench.experiment.rundir import read_queries
from evidence_bench.protocol.stages import PARTNERS
from evidence_bench.runs.data import numbered_jsonl, read_jsonl
from evidence_bench.runs.store import read_tables, trec_qrels, trec_runs
from evidence_bench.seeding import derived_random

__all__ = ["Pool", "PoolItem", "build_pool", "read_pool", "write_pool"]

#: What a pool row holds, in this order (``page_text`` only when the run read pages).
FIELDS = ("query_id", "query", "doc_id", "url", "title", "snippet", "page_text")


@dataclass(frozen=True)
class PoolItem:
    """One result to judge for one query."""

    query_id: str
    query: str
    doc_id: str
    url: str
    title: str
    snippet: str
    page_text: str | None = None

    def to_json(self) -> dict[str, str]:
        row = {name: getattr(self, name) for name in FIELDS}
        if self.page_text is None:
            del row["page_text"]
        return row


@dataclass(frozen=True)
class Pool:
    """A pool and how it was drawn: ``judged`` results of the rankings' tops were left out
    as judged already; ``cut`` by the budget."""

    items: tuple[PoolItem, ...]
    depth: int
    rankings: int
    judged: int
    cut: int = 0


def build_pool(
    run_dir: Path,
    depth: int,
    *,
    qrels: Path | None = None,
    budget: int | None = None,
    seed: int = 0,
) -> Pool:
    """The pool of ``run_dir``'s rankings at ``depth`` (see the module's docstring)."""
    if depth < 1:
        raise ConfigurationError(f"--depth {depth}: the pool depth must be at least 1")
    if budget is not None and budget < 1:
        raise ConfigurationError(f"--budget {budget}: the budget must be at least 1")
    if not run_dir.is_dir():
        raise DataError(f"{run_dir}: not a run directory")
    tables = read_tables(run_dir, only=("runs", "rankings", "trec_qrels"))
    runs = trec_runs(tables)
    if not any(runs.values()):
        raise DataError(f"{run_dir / 'runs.parquet'}: the run holds no rankings to pool")
    judged = {qid: set(urls) for qid, urls in trec_qrels(tables).items()}
    if qrels is not None:
        for qid, grades in read_judgments(qrels).items():
            judged.setdefault(qid, set()).update(
                canonical_url(doc) if is_web_id(doc) else doc for doc in grades
            )
    documents = _documents(run_dir)
    queries = read_queries(run_dir / "queries.csv")
    pages = _pages(run_dir)
    weights: dict[tuple[str, str], float] = {}
    seen: dict[str, list[str]] = {}
    for ranked in runs.values():
        for qid, ranking in ranked.items():
            first = seen.setdefault(qid, [])
            first.extend(canonical_url(u) for u in ranking[:depth])
    for key, ranked in runs.items():
        partner = PARTNERS.get(key[3])
        other = runs.get((*key[:3], partner)) if partner else None
        for qid, ranking in (other or {}).items():
            _add_weights(weights, qid, ranking, ranked.get(qid, []), depth)
    skipped = 0
    items: list[PoolItem] = []
    for qid in sorted(seen, key=_query_order):
        own = judged.get(qid, set())
        for url in dict.fromkeys(seen[qid]):
            doc = documents.get(url, {})
            doc_id = str(doc.get("doc_id") or url)
            if url in own or doc_id in own:
                skipped += 1
                continue
            text = pages.get(url) if pages is not None else None
            items.append(
                PoolItem(
                    qid,
                    queries.get(qid, ""),
                    doc_id,
                    str(doc.get("url") or url),
                    str(doc.get("title") or ""),
                    str(doc.get("snippet") or ""),
                    (text or "") if pages is not None else None,
                )
            )
    derived_random(seed, "pool", depth).shuffle(items)
    cut = 0
    if budget is not None:
        items.sort(key=lambda item: -weights.get((item.query_id, canonical_url(item.url)), 0.0))
        cut = max(0, len(items) - budget)
        items = items[:budget]
    rankings = sum(len(ranked) for ranked in runs.values())
    return Pool(tuple(items), depth, rankings, skipped, cut)


def _add_weights(
    weights: dict[tuple[str, str], float],
    qid: str,
    feedback: list[str],
    control: list[str],
    depth: int,
) -> None:
    """Add each document's |discount difference| between two rankings (MTC for DCG)."""
    discount: dict[str, list[float]] = {}
    for side, ranking in enumerate((feedback, control)):
        for rank, url in enumerate(ranking[:depth], start=1):
            discount.setdefault(canonical_url(url), [0.0, 0.0])[side] = 1.0 / math.log2(rank + 1)
    for url, (a, b) in discount.items():
        weights[qid, url] = weights.get((qid, url), 0.0) + abs(a - b)


def _query_order(query_id: str) -> tuple[int, int | str]:
    return (0, int(query_id)) if query_id.isdigit() else (1, query_id)


def _documents(run_dir: Path) -> dict[str, dict[str, Any]]:
    """``documents.jsonl``'s rows by canonical URL."""
    found: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(run_dir / "documents.jsonl"):
        if isinstance(row.get("url"), str):
            found.setdefault(canonical_url(row["url"]), row)
    return found


def _config(run_dir: Path) -> Mapping[str, Any]:
    path = run_dir / "config.yaml"
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"{path}: cannot be read ({exc})") from exc
    return loaded if isinstance(loaded, dict) else {}


def _reads_pages(node: object) -> bool:
    """Whether any ``evidence`` setting of a config (its grid too) reads pages."""
    if isinstance(node, Mapping):
        return any(
            (str(key).endswith("evidence") and _page_mode(value)) or _reads_pages(value)
            for key, value in node.items()
        )
    if isinstance(node, list):
        return any(_reads_pages(value) for value in node)
    return False


def _page_mode(value: object) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(str(v) in ("page", "both") for v in values)


def _pages(run_dir: Path) -> dict[str, str | None] | None:
    """The page text of each recorded URL, when the run read pages (else None)."""
    config = _config(run_dir)
    if not _reads_pages(config):
        return None
    from evidence_bench.collections.queryset import resolve_path
    from evidence_bench.web.page_cassettes import read_page_cassette

    cassettes = str((config.get("query_set") or {}).get("cassettes", ""))
    path = resolve_path(cassettes, "query_set.cassettes") / "@pages.json"
    try:
        _header, records = read_page_cassette(path)
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: the run read pages, but they cannot be read ({exc})") from exc
    return {url: record.text() for url, record in records.items()}


def write_pool(path: Path, pool: Pool) -> None:
    """``POOL.jsonl``, one row per item, written whole or not at all."""
    lines = (json.dumps(item.to_json(), ensure_ascii=False) + "\n" for item in pool.items)
    write_atomic(path, "".join(lines))


def read_pool(path: Path) -> list[PoolItem]:
    """The rows of a pool file; a row that is not one is a :class:`DataError` naming its line."""
    items: list[PoolItem] = []
    for number, row in numbered_jsonl(path):
        missing = [n for n in FIELDS[:-1] if not isinstance(row.get(n), str)]
        if missing:
            raise DataError(f"{path}:{number}: missing or not text: {', '.join(missing)}")
        if any(c in row[n] for n in ("query_id", "doc_id") for c in "\t\r\n"):
            raise DataError(f"{path}:{number}: a tab or line break in query_id or doc_id")
        page = row.get("page_text")
        items.append(
            PoolItem(
                row["query_id"],
                row["query"],
                row["doc_id"],
                row["url"],
                row["title"],
                row["snippet"],
                page if isinstance(page, str) else None,
            )
        )
    return items
