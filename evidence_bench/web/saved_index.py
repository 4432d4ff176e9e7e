"""The simulator's BM25 index of a collection, saved once and reused by every later run.

An index is saved under the cache directory in
``bm25/<collection checksum>-v<format>-<analysis>/``
(:meth:`~evidence_bench.web.bm25.BM25Index.save`; ``<analysis>`` is
:func:`~evidence_bench.web.bm25.analysis_fingerprint`), so any run over the same collection
files loads it, postings memory-mapped, and a version that analyzes or scores otherwise
never reads it. The cache directory is ``$EVIDENCE_BENCH_CACHE`` when set (empty: nothing
is saved), else ``$XDG_CACHE_HOME/evidence_bench``, else ``~/.cache/evidence_bench``;
deleting it is always safe. Only collections read from files are saved.

An index is written into a temporary directory and renamed into place whole. A saved index
that cannot be read is built and saved again; a cache directory that cannot be written
leaves the index built in memory.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from evidence_bench.collections.beir import Collection
from evidence_bench.web.bm25 import INDEX_FORMAT, BM25Index, analysis_fingerprint

__all__ = ["CACHE_ENV", "cache_directory", "collection_index", "index_directory"]

CACHE_ENV = "EVIDENCE_BENCH_CACHE"


def cache_directory() -> Path | None:
    """Where saved indexes go (the module's docstring), or None when saving is off."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "evidence_bench"


def index_directory(collection: Collection) -> Path | None:
    """Where ``collection``'s saved index is (or would be); None when it is not saved."""
    root = cache_directory()
    if root is None or collection.path is None:
        return None
    return root / "bm25" / f"{collection.checksum}-v{INDEX_FORMAT}-{analysis_fingerprint()}"


def build_index(collection: Collection) -> BM25Index:
    """BM25 over each document's ``title text``, built from the collection's documents."""
    return BM25Index(
        (doc.doc_id, f"{doc.title} {doc.text}") for doc in collection.documents.values()
    )


def collection_index(collection: Collection) -> BM25Index:
    """``collection``'s index: the saved one, else built (and saved where it can be)."""
    directory = index_directory(collection)
    if directory is None:
        return build_index(collection)
    doc_ids = list(collection.documents)
    if directory.is_dir():
        try:
            return BM25Index.load(directory, doc_ids)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # damaged or foreign: built and saved again below
    index = build_index(collection)
    if not _save(index, directory):
        return index
    try:
        return BM25Index.load(directory, doc_ids)  # its pages shared, the built one freed
    except (OSError, ValueError, KeyError, TypeError):
        return index


def _save(index: BM25Index, directory: Path) -> bool:
    """Write ``index`` to ``directory`` whole (a temporary directory renamed into place);
    False when it cannot be written."""
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    except OSError:
        return False
    try:
        index.save(temporary)
        if directory.is_dir():  # one that could not be read
            shutil.rmtree(directory, ignore_errors=True)
        os.rename(temporary, directory)
    except OSError:  # written meanwhile by another process (or no room): theirs stands
        shutil.rmtree(temporary, ignore_errors=True)
        return directory.is_dir()
    return True
