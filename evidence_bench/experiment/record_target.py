"""Where ``record`` writes: never over the cassettes a user already has, unless told to.

Into ``query_set.cassettes`` when it holds no cassettes yet, or with ``record --force``
(never an installed package's); else into a new ``recordings/<query set>/<UTC time>``
seeded with a copy of them. Either way the recording is made in a staging directory and
takes its place only once complete (docs/reference/recording.rst).
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import shutil
import site
import sysconfig
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from evidence_bench.errors import ConfigurationError, WriteError
from evidence_bench.web.cassette_manifest import MANIFEST_NAME

__all__ = [
    "RECORDINGS_DIR", "Changes", "Destination", "changes", "destination", "installed_roots",
    "staged",
]  # fmt: skip

#: Where a recording that may not rewrite its query set's cassettes goes, under the
#: working directory: ``recordings/<query set>/<UTC time>``.
RECORDINGS_DIR = Path("recordings")
_MODE = 0o755


@dataclass(frozen=True)
class Destination:
    """Where a recording ends (``directory``) and the cassettes it starts from
    (``source``): the same directory when ``in_place``."""

    directory: Path
    source: Path
    in_place: bool


@dataclass(frozen=True)
class Changes:
    """A recording's files against the cassettes it started from, by name."""

    changed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    #: files the recording replaced (a manifest under its old name)
    removed: tuple[str, ...] = ()
    unchanged: int = 0

    def __bool__(self) -> bool:
        return bool(self.changed or self.added or self.removed)

    def describe(self) -> str:
        """``61 changed, 3 added`` (the manifest and page cassette counted as files)."""
        parts = [
            f"{len(names)} {what}"
            for names, what in (
                (self.changed, "changed"),
                (self.added, "added"),
                (self.removed, "removed"),
            )
            if names
        ]
        return ", ".join(parts) or "none changed"


def installed_roots() -> list[Path]:
    """The directories installed distributions live in (site-packages, purelib, platlib)."""
    names = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    names.update(site.getsitepackages())
    names.add(site.getusersitepackages())
    return [Path(name).resolve() for name in names if name]


def _installed(path: Path) -> bool:
    resolved = path.resolve()
    return any(resolved.is_relative_to(root) for root in installed_roots())


def _files(directory: Path) -> list[Path]:
    """What a cassette directory holds: its ``*.json`` files (the search cassettes, the
    page cassette, the manifest), not the staging of a write in progress."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.json") if p.is_file())


def destination(
    source: Path, *, query_set: str, force: bool, now: datetime | None = None
) -> Destination:
    """Where a recording of ``query_set``, whose cassettes are in ``source``, goes (see the
    module doc); ``--force`` on an installed package's cassettes is refused."""
    if _installed(source):
        if force:
            raise ConfigurationError(
                f"record --force would rewrite the installed package's cassettes in {source}; "
                "leave out --force to record into a new directory under the working "
                "directory, or set query_set.cassettes to a directory of your own"
            )
    elif force or not _files(source):
        return Destination(source, source, in_place=True)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    parent = Path.cwd() / RECORDINGS_DIR / query_set
    directory, number = parent / stamp, 1
    while directory.exists():
        number += 1
        directory = parent / f"{stamp}-{number}"
    return Destination(directory, source, in_place=False)


def changes(before: Path, after: Path) -> Changes:
    """What ``after``'s cassette files change of ``before``'s."""
    old = {p.name: p for p in _files(before)}
    new = {p.name: p for p in _files(after)}
    changed = tuple(
        name for name in sorted(old.keys() & new.keys())
        if not filecmp.cmp(old[name], new[name], shallow=False)
    )  # fmt: skip
    return Changes(
        changed=changed,
        added=tuple(sorted(new.keys() - old.keys())),
        removed=tuple(sorted(old.keys() - new.keys())),
        unchanged=len(old.keys() & new.keys()) - len(changed),
    )


def _make_dirs(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise WriteError(f"could not create the cassette directory {path}: {reason}") from exc


@contextlib.contextmanager
def staged(target: Destination) -> Iterator[Path]:
    """A staging directory beside ``target.directory`` seeded with ``target.source``'s
    cassettes; when the block ends without an error, the recording takes the destination's
    place (a new directory only if it changes something). Removed whatever happens."""
    parent = target.directory.parent
    made = [d for d in (parent, *parent.parents) if not d.exists()]  # removed if left empty
    _make_dirs(parent)
    try:
        staging = Path(
            tempfile.mkdtemp(dir=target.directory.parent, prefix=f".{target.directory.name}.")
        )
        staging.chmod(_MODE)  # (mkdtemp's own is owner-only; a new directory is renamed whole)
        for path in _files(target.source):
            _seed(path, staging / path.name, link=target.in_place)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise WriteError(
            f"could not stage a recording beside {target.directory}: {reason}"
        ) from exc
    try:
        yield staging
        _finish(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        for directory in made:
            with contextlib.suppress(OSError):  # (not empty: it holds the recording)
                directory.rmdir()


def _seed(path: Path, copy: Path, *, link: bool) -> None:
    """``copy`` of ``path``; with ``link`` (in place), a hard link where it can be: every
    write of a recording renames a new file over the old name, so ``path`` never changes."""
    if link:
        try:
            os.link(path, copy)
            return
        except OSError:  # another file system, or one without hard links
            pass
    shutil.copyfile(path, copy)


def _finish(staging: Path, target: Destination) -> None:
    try:
        if not target.in_place and not changes(target.source, staging):
            return  # the very cassettes it started from: no directory to keep
        if not target.in_place or not target.directory.exists():
            os.replace(staging, target.directory)
            staging.mkdir()  # (for the caller's rmtree)
            return
        found = changes(target.directory, staging)
        names: Sequence[str] = [*found.changed, *found.added]
        # the manifest last: until it is in place, the old one names the old files
        for name in sorted(names, key=lambda name: name == MANIFEST_NAME):
            os.replace(staging / name, target.directory / name)
        for name in found.removed:
            (target.directory / name).unlink()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise WriteError(f"could not move the recording into {target.directory}: {reason}") from exc
