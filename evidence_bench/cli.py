"""``evidence-fetcher``: search Brave from the shell, optionally refining with feedback.

It prints the results in the local ranker's first order as text or JSON; ``--fetch`` adds
each page's date and supporting sentences (LiveFetch); ``--interactive`` starts a
:class:`SearchSession` on them, marked by number, reranked (``show``) and expanded
(``expand``). An error is one line on stderr and exit 1; a usage error exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from evidence_bench._argtypes import count_between
from evidence_bench._printable import json_text, printable
from evidence_bench.engine.base import Label
from evidence_bench.engine.session import SearchSession
from evidence_bench.errors import EvidenceBenchError, FeedbackError
from evidence_bench.evidence import Evidence, canonical_url
from evidence_bench.web.brave import BraveProvider

if TYPE_CHECKING:
    from evidence_bench.livefetch import EvidencePacket, FetchFailure, PacketSet

__all__ = ["main"]

PROG = "evidence-fetcher"
MAX_LIMIT = 200

_HELP = """\
Commands (numbers refer to the list as last displayed):
  more N...        show more results like these
  less N...        show fewer results like these
  relevant N...    these results are relevant
  irrelevant N...  these results are not relevant
  unsure N...      looked at, no opinion (changes nothing)
  show             rerank the results with all feedback so far (no new search)
  expand           search again with a query refined by the feedback, merge new results
  help             this list
  done             finish"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Fetch web evidence from the Brave Search API "
        "(key in BRAVE_SEARCH_API_KEY) and refine it with relevance feedback.",
    )
    parser.add_argument("query", nargs="+", metavar="QUERY", help="the search query")
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (text)"
    )
    parser.add_argument(
        "--limit",
        type=count_between(1, MAX_LIMIT),
        default=10,
        help=f"results to fetch, 1-{MAX_LIMIT} (10)",
    )
    parser.add_argument(
        "--fetch",
        action="store_true",
        help="fetch each result's page and show its publication date and supporting "
        "quotes (LiveFetch; pages cached in --cache)",
    )
    parser.add_argument(
        "--cache",
        metavar="PATH",
        default="livefetch.sqlite",
        help="with --fetch: the SQLite page cache, reused while a page is under a day old "
        "(livefetch.sqlite)",
    )
    parser.add_argument(
        "--allow-private",
        action="store_true",
        help="with --fetch: also fetch pages on loopback, private and link-local addresses "
        "(refused by default as blocked_address; for a server of your own)",
    )
    parser.add_argument(
        "--interactive",
        action="store_true",
        help="mark results and rerank or expand them; type 'help' at the prompt",
    )
    return parser


def _render(results: Sequence[Evidence], fetched: PacketSet | None = None) -> str:
    """The numbered text listing: title, then URL and snippet indented (no snippet line when
    the result has none); with ``fetched``, the page's date and quotes in place of the
    snippet, or why the page was not read."""
    if not results:
        return "No results.\n"
    packets, failures = _by_key(fetched)
    lines: list[str] = []
    for position, item in enumerate(results, start=1):
        lines += [f"{position}. {item.title or '(no title)'}", f"   {item.url}"]
        snippet = [f"   {item.snippet}"] if item.snippet else []
        packet, failure = packets.get(item.key), failures.get(item.key)
        if packet is not None:
            published = packet.published_at
            lines.append(f"   date: {published.date().isoformat() if published else 'unknown'}")
            quotes = [f"   > {quote}" for quote in packet.quotes]
            lines += quotes or snippet or ["   (no supporting sentence)"]
            continue
        if failure is not None:
            detail = f" ({failure.detail})" if failure.detail else ""
            lines.append(f"   page not read: {failure.reason.value}{detail}")
        lines += snippet
    return printable("\n".join(lines) + "\n")


def _by_key(
    fetched: PacketSet | None,
) -> tuple[dict[str, EvidencePacket], dict[str, FetchFailure]]:
    """The packets and the failures of ``fetched``, by canonical URL."""
    if fetched is None:
        return {}, {}
    packets = {packet.url: packet for packet in fetched.packets}
    return packets, {canonical_url(failure.url): failure for failure in fetched.failures}


def _fetch_pages(
    query: str, results: Sequence[Evidence], cache: str, *, allow_private: bool = False
) -> PacketSet:
    """Each result's page through LiveFetch (pages cached in ``cache``): no freshness
    filter, no new discovery."""
    from evidence_bench.livefetch import Candidate, LiveFetch, RetrievalIntent, StaticDiscovery
    from evidence_bench.web.guard import AddressPolicy

    candidates = [Candidate.of(item, item.source) for item in results]
    intent = RetrievalIntent(query, max_results=max(len(results), 1), freshness_days=None)
    policy = AddressPolicy(allow_private=allow_private)
    with LiveFetch(StaticDiscovery(candidates), cache_path=cache, policy=policy) as lf:
        return lf.run_sync(intent)


def _fetched_json(results: Sequence[Evidence], fetched: PacketSet) -> list[dict[str, object]]:
    packets, failures = _by_key(fetched)
    rows: list[dict[str, object]] = []
    for item in results:
        packet = packets.get(item.key)
        failure = failures.get(item.key)
        published = packet.published_at if packet else None
        rows.append(
            {
                **item.to_dict(),
                "published_at": published.isoformat() if published else None,
                "quotes": list(packet.quotes) if packet else [],
                "fetch_failure": failure.to_dict() if failure else None,
            }
        )
    return rows


def _positions(params: Sequence[str]) -> list[int]:
    if not params:
        raise FeedbackError("give the numbers of the results, e.g. 'more 1 3'")
    positions = []
    for param in params:
        try:
            positions.append(int(param))
        except ValueError:
            raise FeedbackError(f"not a result number: {param!r}") from None
    return positions


def _interact(session: SearchSession, stdin: TextIO, stdout: TextIO, stderr: TextIO) -> int:
    """The feedback loop: one command per line until ``done`` or end of input."""
    labels = {label.value: label for label in Label}
    stdout.write(_render(session.ranking))
    stdout.write("Type 'help' for commands, 'done' to finish.\n")
    while True:
        stdout.write("> ")
        stdout.flush()
        line = stdin.readline()
        if not line:  # end of input: finish like 'done', on a fresh line
            stdout.write("\n")
            return 0
        words = line.split()
        if not words:
            continue
        command, params = words[0].lower(), words[1:]
        if command == "done":
            return 0
        if command == "help":
            stdout.write(_HELP + "\n")
        elif command in labels:
            try:
                positions = _positions(params)
                session.mark(labels[command], *positions)
            except FeedbackError as exc:
                stdout.write(f"{exc}\n")
                continue
            stdout.write(f"recorded {command}: {' '.join(map(str, positions))}\n")
        elif command == "show":
            stdout.write("Updated ranking from accumulated feedback:\n")
            stdout.write(_render(session.show()))
        elif command == "expand":
            try:
                expansion = session.expand()
            except EvidenceBenchError as exc:  # keep the session and its feedback
                stderr.write(printable(f"{PROG}: {exc}\n"))
                continue
            added = expansion.added
            stdout.write(printable(f"Searching with refined query: {expansion.refined.query}\n"))
            stdout.write(f"Added {added} new {'result' if added == 1 else 'results'}.\n")
            stdout.write("Updated ranking:\n")
            stdout.write(_render(expansion.ranking))
        else:
            stdout.write(f"unknown command {command!r}; type 'help' for the list\n")


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0 ok, 1 failure, 2 usage error)."""
    try:
        return _main(argv)
    except BrokenPipeError:  # the reader went away (``| head``): not an error of ours
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: a usage error (2) or --help (0)
        return exc.code if isinstance(exc.code, int) else 0
    if args.interactive and args.format == "json":
        print(f"{PROG}: --interactive works only with --format text", file=sys.stderr)
        return 2
    if args.interactive and args.fetch:
        print(f"{PROG}: --fetch works only without --interactive", file=sys.stderr)
        return 2
    for option, given in (("--cache", args.cache != parser.get_default("cache")),
                          ("--allow-private", args.allow_private)):  # fmt: skip
        if given and not args.fetch:
            print(f"{PROG}: {option} works only with --fetch", file=sys.stderr)
            return 2
    query = " ".join(args.query)
    try:
        # Both modes show the session's first ranking (the local ranker, no feedback yet),
        # so a query lists in the same order with and without --interactive.
        session = SearchSession(query, BraveProvider(), limit=args.limit)
        if args.interactive:
            if not session.ranking:
                sys.stdout.write(_render([]))
                return 0
            return _interact(session, sys.stdin, sys.stdout, sys.stderr)
        results = session.ranking
        fetched = (
            _fetch_pages(query, results, args.cache, allow_private=args.allow_private)
            if args.fetch and results
            else None
        )
    except EvidenceBenchError as exc:
        print(printable(f"{PROG}: {exc}"), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        sys.stdout.write("\n")
        return 130
    if args.format == "json":
        rows = (
            _fetched_json(results, fetched)
            if fetched is not None
            else [r.to_dict() for r in results]
        )
        sys.stdout.write(json_text(rows) + "\n")
    else:
        sys.stdout.write(_render(results, fetched))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
