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
    freed one stays resident until trimmed (a sweep's tail held ~70 MB so). Elsewhere
    (musl, macOS) only the collection."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
