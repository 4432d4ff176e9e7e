"""``python -m evidence_bench livefetch QUERY``: LiveFetch packets as text or JSON.

Discovery is Brave (web, with ``BRAVE_SEARCH_API_KEY``), ddgs (web without a key, and
news) or the given feeds (rss); ``--discovery-file`` records it to, or replays it from, a
JSON file. Pages are cached in ``--cache`` (``livefetch.sqlite``). Exit status 0 when the
run finished (failed pages are listed, not fatal), 1 on an error (one line on stderr),
2 on a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TextIO

from evidence_bench._argtypes import count_between, number_in
from evidence_bench._printable import json_text, printable
from evidence_bench.errors import EvidenceBenchError
from evidence_bench.livefetch.cache import DEFAULT_CACHE_PATH
from evidence_bench.livefetch.discovery import (
    BraveDiscovery,
    DdgsDiscovery,
    Discovery,
    FeedDiscovery,
    RecordedDiscovery,
    RecordMode,
)
from evidence_bench.livefetch.pipeline import LiveFetch, default_discovery
from evidence_bench.livefetch.records import EvidencePacket, Mode, PacketSet, RetrievalIntent
from evidence_bench.web.guard import AddressPolicy

__all__ = ["main", "render_packet"]

PROG = "python -m evidence_bench livefetch"
MAX_RESULTS = 50


_DAYS = number_in(float, 0, above=True, unit="days (or 'none')")


def _days(value: str) -> float | None:
    return None if value.strip().lower() == "none" else _DAYS(value)


def _moment(value: str) -> datetime:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO-8601 date such as 2026-12-01: {value!r}"
        ) from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Discover pages for a query, fetch them, extract their text and date, "
        "score them (relevance, freshness, trust, redundancy) and print the best as "
        "evidence packets with supporting quotes.",
    )
    parser.add_argument("query", nargs="+", metavar="QUERY", help="the search query")
    parser.add_argument(
        "--mode",
        choices=[mode.value for mode in Mode],
        default=Mode.NEWS.value,
        help="news search, web search or RSS/Atom feeds (news)",
    )
    parser.add_argument(
        "--max-results",
        type=count_between(1, MAX_RESULTS),
        default=8,
        help=f"packets to print, 1-{MAX_RESULTS} (8)",
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (text)"
    )
    parser.add_argument(
        "--freshness-days",
        type=_days,
        default=14,
        metavar="DAYS",
        help="drop pages dated more than DAYS before --as-of; 'none' keeps all (14)",
    )
    parser.add_argument(
        "--as-of",
        type=_moment,
        default=None,
        metavar="DATE",
        help="the reference date of freshness, ISO-8601 (now)",
    )
    parser.add_argument("--no-quotes", action="store_true", help="do not select quotes")
    for flag, metavar, what in (
        ("--allow-domain", "DOMAIN", "keep only pages on DOMAIN or its subdomains"),
        ("--deny-domain", "DOMAIN", "drop pages on DOMAIN or its subdomains"),
        ("--feed", "URL", "an RSS or Atom feed to read in --mode rss"),
    ):
        parser.add_argument(
            flag, action="append", default=[], metavar=metavar, help=f"{what} (repeatable)"
        )
    parser.add_argument(
        "--discovery",
        choices=("auto", "brave", "ddgs"),
        default="auto",
        help="where web candidates come from: brave (BRAVE_SEARCH_API_KEY), ddgs "
        "(keyless), or auto: brave when the key is set, else ddgs (auto)",
    )
    parser.add_argument(
        "--discovery-file",
        metavar="FILE",
        default=None,
        help="replay discovery from FILE (JSON), or record into it with --record-mode",
    )
    parser.add_argument(
        "--record-mode",
        choices=[mode.value for mode in RecordMode],
        default="none",
        help="with --discovery-file: none replays only, new_episodes records what is "
        "missing, all records afresh (none)",
    )
    parser.add_argument(
        "--cache",
        metavar="PATH",
        default=DEFAULT_CACHE_PATH,
        help=f"the SQLite page cache ({DEFAULT_CACHE_PATH})",
    )
    parser.add_argument("--no-cache", action="store_true", help="fetch every page afresh")
    parser.add_argument(
        "--allow-private",
        action="store_true",
        help="also fetch pages and feeds on loopback, private and link-local addresses "
        "(refused by default as blocked_address; for a server of your own)",
    )
    parser.add_argument(
        "--cache-max-age",
        type=number_in(float, 0, unit="hours"),
        default=24.0,
        metavar="HOURS",
        help="a cached page younger than HOURS is used without a request (24)",
    )
    return parser


def _discovery(args: argparse.Namespace, intent: RetrievalIntent) -> Discovery:
    inner: Discovery
    policy = AddressPolicy(allow_private=args.allow_private)
    if intent.mode is Mode.RSS:
        inner = FeedDiscovery(args.feed, policy=policy)
    elif args.discovery == "brave":
        inner = BraveDiscovery()
    elif args.discovery == "ddgs":
        inner = DdgsDiscovery()
    else:
        inner = default_discovery(intent, policy=policy)
    if args.discovery_file is None:
        return inner
    return RecordedDiscovery(args.discovery_file, inner, record_mode=args.record_mode)


def _date(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else "no date"


def render_packet(position: int, packet: EvidencePacket) -> list[str]:
    """A packet as the text listing shows it: title; URL; date and score; quotes."""
    r, f, t, d = packet.score_breakdown
    lines = [
        f"{position}. {packet.title or '(no title)'}",
        f"   {packet.url}",
        f"   published {_date(packet.published_at)} · score {packet.score:.3f} "
        f"(R {r:.2f} F {f:.2f} T {t:.2f} D {d:.2f})",
    ]
    lines += [f"   > {quote}" for quote in packet.quotes]
    return lines


def _render(packets: PacketSet, out: TextIO) -> None:
    """The text listing, written through :func:`printable` (the pages' own text)."""
    lines: list[str] = [] if packets.packets else ["No packets."]
    for position, packet in enumerate(packets, start=1):
        lines += render_packet(position, packet)
    if packets.failures:
        lines.append(f"\nNot fetched ({len(packets.failures)}):")
        for failure in packets.failures:
            detail = f" ({failure.detail})" if failure.detail else ""
            lines.append(f"   {failure.url}: {failure.reason.value}{detail}")
    if packets.stale:
        lines.append(f"\nOlder than the freshness window ({len(packets.stale)}):")
        lines += [f"   {url}" for url in packets.stale]
    if packets.excluded:
        lines.append(f"\nExcluded by the domain lists: {len(packets.excluded)}")
    out.write(printable("".join(f"{line}\n" for line in lines)))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (0 ok, 1 failure, 2 usage error)."""
    parser = _parser()
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:  # argparse: a usage error (2) or --help (0)
        return exc.code if isinstance(exc.code, int) else 0
    if args.feed and args.mode != "rss":
        print(f"{PROG}: --feed needs --mode rss", file=sys.stderr)
        return 2
    try:
        intent = RetrievalIntent(
            " ".join(args.query),
            mode=Mode(args.mode),
            max_results=args.max_results,
            freshness_days=args.freshness_days,
            need_quotes=not args.no_quotes,
            allow_domains=tuple(args.allow_domain),
            deny_domains=tuple(args.deny_domain),
        )
        with LiveFetch(
            _discovery(args, intent),
            cache_path=None if args.no_cache else args.cache,
            cache_max_age=timedelta(hours=args.cache_max_age),
            as_of=args.as_of,
            policy=AddressPolicy(allow_private=args.allow_private),
        ) as lf:
            packets = lf.run_sync(intent)
    except EvidenceBenchError as exc:
        print(printable(f"{PROG}: {exc}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    if args.format == "json":
        packet_set = {"query": intent.query, "mode": intent.mode.value, **packets.to_dict()}
        sys.stdout.write(json_text(packet_set) + "\n")
    else:
        _render(packets, sys.stdout)
    return 0
