"""The data the package ships: its configs, collections and cassettes.

They live in the repository's top-level ``conf/``, ``collections/`` and ``cassettes/``;
``evidence_bench/_data/`` links to them, so a wheel built from the checkout holds them as
package data (``pyproject.toml``'s ``package-data``) and both read them through
``importlib.resources`` from the same place. A config names shipped data as
``pkg://collections/cranfield``; any other relative path is the user's, against the
working directory (:func:`evidence_bench.collections.queryset.resolve_path`).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from importlib.resources import files
from pathlib import Path

__all__ = ["PACKAGED", "distribution_version", "packaged"]

#: How a config value names shipped data: ``pkg://collections/cranfield``.
PACKAGED = "pkg://"


def packaged(relative: str) -> Path:
    """The shipped ``relative`` (``conf``, ``collections/cranfield``, ...), which may not exist
    (``_data`` is a real directory: the package is never zipped)."""
    return (Path(str(files("evidence_bench").joinpath("_data"))) / relative.strip("/")).resolve()


def distribution_version(name: str = "evidence_bench") -> str:
    """The installed version of distribution ``name``, or ``"unknown"`` when it has no
    metadata (a tree run without being installed): what manifests and cassettes record."""
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"
