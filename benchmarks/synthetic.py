"""A synthetic BEIR-layout collection of any size, the same for a seed: what the scale
benchmarks record and run on (it is generated, never committed).

    python benchmarks/synthetic.py DIR [--documents N] [--queries Q] [--seed S]

No NPL ships with the project, so the words follow a Zipfian law (rank r drawn with
probability proportional to 1 / r**1.1) over a vocabulary of pseudo-words, the stop words
first: the shape of NPL's word frequencies. A document has a title of 3-8 words and a text
of 20-120. A query is the 3-5 rarest distinct words of one target document, which its
qrels judge relevant (grade 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evidence_bench.web.bm25 import STOP_WORDS

VOCABULARY = 200_000
EXPONENT = 1.1
_CHUNK = 20_000
_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]


def vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    """The stop words, then distinct pseudo-words of 2-4 syllables, ``size`` in all."""
    words = sorted(STOP_WORDS)
    seen = set(words)
    while len(words) < size:
        parts = rng.integers(0, len(_SYLLABLES), size=(size, 4))
        lengths = rng.integers(2, 5, size=size)
        for row, length in zip(parts.tolist(), lengths.tolist(), strict=True):
            word = "".join(_SYLLABLES[i] for i in row[:length])
            if word not in seen:
                seen.add(word)
                words.append(word)
                if len(words) == size:
                    break
    return words


def generate(directory: Path, documents: int, queries: int, seed: int = 0) -> Path:
    """Write ``corpus.jsonl``, ``queries.jsonl`` and ``qrels.tsv`` under ``directory``."""
    rng = np.random.default_rng(seed)
    words = vocabulary(VOCABULARY, rng)
    weights = 1.0 / np.arange(1, VOCABULARY + 1) ** EXPONENT
    cumulative = np.cumsum(weights / weights.sum())
    targets = set(rng.choice(documents, size=min(queries, documents), replace=False).tolist())
    chosen: dict[int, list[int]] = {}
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "corpus.jsonl").open("w", encoding="utf-8") as corpus:
        for first in range(0, documents, _CHUNK):
            count = min(_CHUNK, documents - first)
            title_sizes = rng.integers(3, 9, size=count)
            text_sizes = rng.integers(20, 121, size=count)
            drawn = np.searchsorted(cumulative, rng.random(int((title_sizes + text_sizes).sum())))
            drawn = np.minimum(drawn, VOCABULARY - 1).tolist()
            at = 0
            lines = []
            for i in range(count):
                title = drawn[at : at + title_sizes[i]]
                at += title_sizes[i]
                text = drawn[at : at + text_sizes[i]]
                at += text_sizes[i]
                doc = first + i
                if doc in targets:
                    chosen[doc] = sorted(set(title) | set(text), reverse=True)
                record = {
                    "_id": str(doc),
                    "title": " ".join(words[w] for w in title),
                    "text": " ".join(words[w] for w in text),
                }
                lines.append(json.dumps(record))
            corpus.write("\n".join(lines) + "\n")
    with (directory / "queries.jsonl").open("w", encoding="utf-8") as out:
        for n, doc in enumerate(sorted(chosen)):
            rare = chosen[doc][: int(rng.integers(3, 6))]
            out.write(json.dumps({"_id": f"q{n}", "text": " ".join(words[w] for w in rare)}))
            out.write("\n")
    with (directory / "qrels.tsv").open("w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for n, doc in enumerate(sorted(chosen)):
            out.write(f"q{n}\t{doc}\t1\n")
    return directory


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--documents", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    generate(options.directory, options.documents, options.queries, options.seed)
    print(options.directory)


if __name__ == "__main__":
    main(sys.argv[1:])
