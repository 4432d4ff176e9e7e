"""The Jinja2 environment the report's page and its charts are rendered in."""

from __future__ import annotations

from jinja2 import BytecodeCache, Environment

from evidence_bench._templates import template_environment

__all__ = ["report_environment"]


def report_environment(*, bytecode_cache: BytecodeCache | None = None) -> Environment:
    """The environment of the report's templates (``evidence_bench/report/templates``,
    :func:`~evidence_bench._templates.template_environment`), block tags trimmed."""
    return template_environment(
        "evidence_bench.report", trim_blocks=True, lstrip_blocks=True, bytecode_cache=bytecode_cache
    )
