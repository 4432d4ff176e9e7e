"""``serve``: a Brave-compatible simulator of a collection on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

from evidence_bench.commands._common import asks_help, fail
from evidence_bench.errors import ConfigurationError

__all__ = ["serve_command"]


def _key_values(argv: list[str], allowed: dict[str, str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for arg in argv:
        key, sep, value = arg.partition("=")
        if not sep or key not in allowed:
            valid = ", ".join(f"{k}=<{v}>" for k, v in allowed.items())
            fail(f"serve: unexpected argument {arg!r} (valid: {valid})", 2)
        values[key] = value
    return values


def _integer(args: dict[str, str], key: str, default: str | None) -> int | None:
    value = args.get(key, default)
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(f"{key}={value!r} is not a whole number") from None


def serve_command(argv: list[str]) -> None:
    allowed = {"collection": "name or path", "port": "int", "token": "text"}
    allowed["rate_limit"] = "requests/s"
    asks_help(
        argv,
        "usage: python -m evidence_bench serve "
        + " ".join(f"[{key}=<{kind}>]" for key, kind in allowed.items()),
    )
    args = _key_values(argv, allowed)
    from evidence_bench.collections.beir import load_collection
    from evidence_bench.collections.queryset import resolve_path
    from evidence_bench.web.simulator import BraveSimulator, run_server

    name = args.get("collection", "cranfield")
    try:
        port = _integer(args, "port", "8765") or 0
        rate = _integer(args, "rate_limit", None)
    except ConfigurationError as exc:  # a usage error (a bug's ValueError is not one)
        fail(f"serve: {exc}", 2)
    path = (
        Path(name)
        if Path(name).is_dir()
        else resolve_path(f"pkg://collections/{name}", "collection")
    )
    simulator = BraveSimulator(
        load_collection(path, name=path.name), token=args.get("token"), rate_limit=rate
    )
    run_server(simulator, "127.0.0.1", port)
