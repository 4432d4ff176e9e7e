"""Lazy re-exports for a package's ``__init__`` (PEP 562, as ``lazy_loader.attach``): the
first use of a name imports its module. :func:`module` does the same for one dependency
(``pd = module("pandas")``), so a run's parent forks its workers before loading pandas.
"""

import importlib
import sys
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any


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


class _Module(types.ModuleType):
    """Module ``name``, imported at the first lookup of one of its names; every lookup reads
    the real module's current value (as a plain import's binding would, a test's
    monkeypatch included)."""

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self.__name__), attr)


def module(name: str) -> Any:
    """A stand-in for the module ``name`` that imports it when one of its names is first
    used (declare the real import under ``TYPE_CHECKING`` for type checkers)."""
    return _Module(name)
