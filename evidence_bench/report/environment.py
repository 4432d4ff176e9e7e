"""The Jinja2 environment the report's page and its charts are rendered in: Jinja2's own,
autoescaping every value shown (``markupsafe.escape``), undefined names an error."""

from __future__ import annotations

from jinja2 import BytecodeCache, Environment, PackageLoader, StrictUndefined

__all__ = ["report_environment"]


def report_environment(*, bytecode_cache: BytecodeCache | None = None) -> Environment:
    """The environment of the report's templates (``evidence_bench/report/templates``):
    autoescaping, undefined names an error, block tags trimmed."""
    return Environment(
        loader=PackageLoader("evidence_bench.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=bytecode_cache,
    )
