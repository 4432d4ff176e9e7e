"""``:runtime:`EXPERIMENT```: how long an experiment took, from a measured run, never typed.

``make doctest-slow`` (with ``make samples``) runs the manual's commands and keeps, for each
experiment they ran, the run manifest's ``wall_time_s`` in ``docs/_samples/runtimes.json``
with the machine's CPU count; the role renders it ("about 2.6 minutes on 2 CPUs"). An
experiment without a measurement is a build warning (an error under ``-W``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

RUNTIMES = Path(__file__).resolve().parents[1] / "_samples" / "runtimes.json"
logger = logging.getLogger(__name__)


def spoken(seconds: float) -> str:
    """``seconds`` as a reader says it: "about 40 seconds", "about 2.6 minutes"."""
    if seconds < 10:
        return "a few seconds"
    if seconds < 90:
        return f"about {round(seconds / 5) * 5:.0f} seconds"
    return f"about {seconds / 60:.1f} minutes"


def runtime_role(
    name: str, rawtext: str, text: str, lineno: int, inliner: Any, options: Any = None,
    content: Any = None,
) -> tuple[list[nodes.Node], list[nodes.system_message]]:  # fmt: skip
    measured = json.loads(RUNTIMES.read_text()) if RUNTIMES.exists() else {}
    entry = measured.get(text)
    if entry is None:
        message = inliner.reporter.warning(
            f"no measured runtime of {text!r} in {RUNTIMES.name}: run make samples", line=lineno
        )
        return [nodes.Text(text)], [message]
    cpus = entry.get("cpus")
    where = f" on {cpus} CPUs" if cpus else ""
    return [nodes.Text(f"{spoken(float(entry['wall_time_s']))}{where}")], []


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_role("runtime", runtime_role)
    return {"parallel_read_safe": True}
