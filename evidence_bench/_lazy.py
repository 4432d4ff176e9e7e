"""Lazy re-exports for a package's ``__init__`` (PEP 562), as scientific Python's
``lazy_loader.attach`` does: importing the package imports none of the modules it re-exports;
the first use of a name imports its module and keeps the value in the package.

So ``python -m evidence_bench report RUN_DIR`` does not pay for httpx, trafilatura or the
engine, and ``from evidence_bench import LiveFetch`` still works. Each ``__init__`` also
imports its names under ``TYPE_CHECKING``, for type checkers and readers.
"""

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def attach(
    package: str, homes: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public names live in the
    modules ``homes`` names (module -> names)."""
    where = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)  # the next use is a plain lookup
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return __getattr__, __dir__
