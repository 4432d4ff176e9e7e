"""Hand freed heap memory back to the system between the steps of a run's tail."""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
from functools import cache
from typing import Any


@cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release_memory() -> None:
    """Collect cycles, then glibc's ``malloc_trim(0)``: numpy's and pandas' arrays of a few
    MB come from the heap once glibc has raised its mmap threshold (``mallopt(3)``), and a
    freed one stays resident until trimmed. Elsewhere (musl, macOS) only the collection.

    Kept for the peak memory of a run (issue 27's rule: a gain of 20% or more):
    ``benchmarks/bench_ab.py``, ``rocchio_sweep workers=1``, peak RSS 695 MB without it,
    516 MB with it (-26%); the collection alone gave 687 MB."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
