"""The SHA-256 of each table a run wrote, kept in its manifest and checked when it is read.

A run's manifest (``manifest.json``) holds ``tables``: each Parquet file's name and the
SHA-256 of its bytes, taken once the run wrote them. :func:`check_tables` recomputes them
before ``report`` and ``gather`` read a run: a table swapped for another run's or edited
since is refused in one line naming the run and the table. A run written before manifests
held checksums has no ``tables``: it is read unchecked, and :func:`check_tables` says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from evidence_bench.errors import DataError

__all__ = ["MANIFEST_KEY", "check_tables", "file_sha256", "table_checksums"]

#: The manifest's entry: table file name -> SHA-256 hex digest.
MANIFEST_KEY = "tables"


def file_sha256(path: Path) -> str:
    """The SHA-256 of the file ``path``'s bytes, as hex."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def table_checksums(run_dir: Path) -> dict[str, str]:
    """Each ``*.parquet`` file of ``run_dir`` and its SHA-256, by name."""
    return {path.name: file_sha256(path) for path in sorted(run_dir.glob("*.parquet"))}


def check_tables(run_dir: Path, manifest: Mapping[str, Any]) -> str:
    """ "" when every table the manifest lists has its checksum; a note when the manifest
    lists none (a run from before checksums). Raises :class:`DataError` naming the run and
    the first table that is missing or whose bytes changed."""
    listed = manifest.get(MANIFEST_KEY)
    if listed is None:
        return (
            f"{run_dir} was written before runs kept their tables' checksums: "
            "its tables are read unchecked"
        )
    if not isinstance(listed, Mapping):
        raise DataError(f"{run_dir / 'manifest.json'}: '{MANIFEST_KEY}' is not an object")
    for name, digest in sorted(listed.items()):
        path = run_dir / str(name)
        if Path(str(name)).name != name or not path.is_file():
            raise DataError(f"{run_dir}: table {name} is missing (its manifest lists it)")
        if file_sha256(path) != digest:
            raise DataError(
                f"{run_dir}: table {name} is not the one the run wrote (its SHA-256 differs "
                "from the manifest's: swapped or edited since); run it again"
            )
    return ""
