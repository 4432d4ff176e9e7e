"""Sphinx configuration for the evidence_bench manual (``make docs``).

The references are generated at build time from the code itself, so they cannot drift:
``_ext/apiref.py`` (autodoc of ``evidence_bench.__all__``), ``_ext/cliref.py`` (the usage
and argparse help of both commands) and ``_ext/configref.py`` (the typed Hydra schemas and
the YAML files under ``conf/``).
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))
sys.path.insert(0, str(DOCS.parent))

import evidence_bench  # noqa: E402

project = "evidence_bench"
author = "the evidence_bench authors"
copyright = "2026, the evidence_bench authors"
release = evidence_bench.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "apiref",
    "cliref",
    "configref",
    "runtimes",
]

exclude_patterns = ["_build"]
default_role = "literal"
html_theme = "furo"
html_title = f"evidence_bench {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True  # ``analyzer=DEFAULT_ANALYZER``, not a salted frozenset repr
autodoc_default_options = {"members": True, "undoc-members": True, "show-inheritance": True}
