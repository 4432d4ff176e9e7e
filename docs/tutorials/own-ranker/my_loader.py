"""A query-set loader: documents, queries and judgments from three TSV files of my own."""

import csv
from pathlib import Path


def _rows(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as lines:
        return list(csv.reader(lines, delimiter="\t"))


def load(directory: str) -> dict[str, dict]:
    root = Path(directory)
    documents = {doc_id: {"title": title, "text": text}
                 for doc_id, title, text in _rows(root / "docs.tsv")}  # fmt: skip
    queries = {query_id: text for query_id, text in _rows(root / "topics.tsv")}
    qrels: dict[str, dict[str, int]] = {}
    for query_id, doc_id, grade in _rows(root / "judgments.tsv"):
        qrels.setdefault(query_id, {})[doc_id] = int(grade)
    return {"documents": documents, "queries": queries, "qrels": qrels}
