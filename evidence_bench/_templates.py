"""The Jinja2 environment templates are rendered in: Jinja2's own, autoescaping every
value shown (``markupsafe.escape``), an undefined name an error."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

__all__ = ["template_environment"]


def template_environment(package: str, **options: Any) -> Environment:
    """The environment of ``package``'s ``templates`` folder; ``options`` are the rest of
    :class:`jinja2.Environment`'s (whitespace control, a bytecode cache)."""
    return Environment(
        loader=PackageLoader(package, "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        **options,
    )
