"""The one reader of ``#:`` field comments, under ``--help`` and the configuration reference."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from evidence_bench._doc_comments import field_comments
from evidence_bench.experiment.config import PagesConf

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class _Toy:
    #: The first line,
    #: and the second.
    alpha: float = 1.0
    beta: int = 0  # a plain comment is no doc comment
    #: Set apart by a blank line, not its.

    gamma: str = ""
    #: Delta's.
    delta: bool = False


def test_the_comment_lines_above_a_field_are_its_doc() -> None:
    assert field_comments(_Toy) == {
        "alpha": "The first line, and the second.",
        "delta": "Delta's.",
    }


def test_help_and_the_reference_read_the_same_comments() -> None:
    """``--help`` shows the first sentence of what the manual's reference shows whole."""
    from evidence_bench.commands._help import _field_help

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        import configref
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    reference = configref.collect(ROOT / "conf")
    pages = next(group for group in reference.groups if group.key == "pages")
    docs = {spec.key: spec.doc for spec in pages.fields}
    assert {key.removeprefix("pages."): doc for key, doc in docs.items()} == field_comments(
        PagesConf
    )
    helps = _field_help()
    assert docs and all(docs[key].replace("``", "").startswith(helps[key]) for key in docs)
