"""Writing a file whole or not at all: to a temporary file beside it, then a rename.

``os.replace`` within one directory is atomic on POSIX, so a reader sees the old file or
the new one, never a truncated mix; a full disk, a read-only mount or a kill leaves the
old file as it was. Cassettes, their manifest and baselines are written this way; a run
directory is staged and renamed whole (``experiment/rundir.py``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from evidence_bench.errors import WriteError

__all__ = ["write_atomic", "write_error"]

#: A written file is no secret; mkstemp's own mode is owner-only.
_MODE = 0o644


def write_error(path: Path, exc: OSError) -> WriteError:
    """The one-line error for ``exc`` raised while writing ``path``."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return WriteError(f"could not write {path}: {reason}; the file on disk is unchanged")


def write_atomic(path: Path, data: str | bytes, *, parents: bool = False) -> None:
    """Write ``data`` (text is UTF-8) to ``path`` through a temporary file and a rename,
    creating its missing folders first when ``parents``.

    Raises :class:`WriteError` naming ``path`` when any step fails (no space left, quota,
    read-only file system, no permission); the temporary file is removed and ``path``
    keeps its previous content.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    tmp: str | None = None
    try:
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())  # the bytes are on disk before the name points at them
        os.chmod(tmp, _MODE)
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        raise write_error(path, exc) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
