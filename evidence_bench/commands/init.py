"""``init DIR``: a starter project for measuring a ranker of one's own, gated in CI: the
templates of ``commands/starter/`` written into an empty or new ``DIR``, whole or not at all.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from importlib.resources import files
from pathlib import Path

from evidence_bench._resources import distribution_version
from evidence_bench.commands._common import PROG, asks_help, fail

__all__ = ["STARTER", "init_command", "write_starter"]

#: Each file ``init`` writes, and the template it is written from (None: an empty file).
STARTER: dict[str, str | None] = {
    "README.md": "README.md",
    "my_ranker.py": "my_ranker.py",
    "conf/experiment/my_experiment.yaml": "my_experiment.yaml",
    "baselines/.gitkeep": None,
    ".github/workflows/evidence-gate.yml": "evidence-gate.yml",
}

_USAGE = f"""\
usage: {PROG} init DIR

Write a starter project into DIR (made if missing; it must be empty): {", ".join(STARTER)}.
Then, in DIR: run +experiment=my_experiment, check ... --update, check (see its README.md)."""


def init_command(argv: list[str]) -> None:
    """``init DIR``."""
    asks_help(argv, _USAGE)
    if len(argv) != 1 or argv[0].startswith("-"):
        fail(_USAGE.splitlines()[0], 2)
    target = Path(argv[0])
    from evidence_bench.errors import EvidenceBenchError

    try:
        written = write_starter(target)
    except EvidenceBenchError as exc:
        fail(f"init: {exc}")
    for path in written:
        print(f"init: wrote {target / path}")
    print(f"init: next, in {target}: {PROG} run +experiment=my_experiment (see README.md)")


def write_starter(target: Path) -> list[str]:
    """Write :data:`STARTER` into ``target``; the relative paths written, in order.

    Raises :class:`~evidence_bench.errors.ConfigurationError` when ``target`` is a file or a
    directory that is not empty, and :class:`~evidence_bench.errors.WriteError` when a file
    cannot be written; either way nothing is left in ``target``.
    """
    from evidence_bench.errors import ConfigurationError, WriteError

    if target.exists() and not target.is_dir():
        raise ConfigurationError(f"{target} is not a directory")
    if target.is_dir() and any(target.iterdir()):
        raise ConfigurationError(
            f"{target} is not empty: init writes a starter project only into an empty or new "
            "directory"
        )
    pinned = distribution_version()
    if pinned == "unknown":
        raise ConfigurationError(
            "evidence_bench is not installed (no package metadata), so the starter cannot pin "
            "its version: install it (pip install -e . in a checkout) and run init again"
        )
    templates = files("evidence_bench").joinpath("commands", "starter")
    created = not target.exists()
    moved: list[Path] = []
    stage: Path | None = None
    try:
        target.mkdir(parents=True, exist_ok=True)
        stage = Path(tempfile.mkdtemp(prefix=".evidence-bench-init-", dir=target))
        for relative, template in STARTER.items():
            path = stage / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            text = "" if template is None else templates.joinpath(template).read_text("utf-8")
            path.write_text(text.replace("{version}", pinned), encoding="utf-8")
        for entry in sorted(stage.iterdir()):  # the top-level entries, a rename each
            os.replace(entry, target / entry.name)
            moved.append(target / entry.name)
        stage.rmdir()
    except OSError as exc:
        for path in moved:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if created:
            shutil.rmtree(target, ignore_errors=True)
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise WriteError(
            f"could not write the starter project into {target}: {reason}; nothing was written"
        ) from exc
    return list(STARTER)
