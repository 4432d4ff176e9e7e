"""``python -m evidence_bench COMMAND`` (and the ``evidence-bench`` console script): the
commands are in :data:`evidence_bench.commands.COMMANDS`."""

from __future__ import annotations

from evidence_bench.commands import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
