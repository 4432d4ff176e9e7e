"""The destination policy of every fetch of a web-sourced URL, and the transports that hold it.

A URL from a search result, a feed entry or a redirect may name any address. The policy
refuses the ones that are not the open web: loopback, private, link-local, multicast,
unspecified, reserved and other non-global ranges (IANA's special-purpose registries, as
:mod:`ipaddress` knows them), in IPv4, IPv6 and the IPv6 forms that embed an IPv4 address
(``::ffff:127.0.0.1``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``). It is checked three
times on every hop: on the URL's host as written (every spelling the C library parses as an
address, ``2130706433`` and ``127.1`` included, and the ``localhost`` names of RFC 6761), on
every address the host resolves to, and on the address the socket is connected to. The
socket connects to the address that was checked, never to the name again, so an answer that
changes between two lookups (DNS rebinding) cannot slip through. ``allow_private=True``
turns the policy off, for a server of one's own on 127.0.0.1.

:class:`GuardedTransport` is an httpx transport on an httpcore connection pool whose network
backend does the resolving and the checks; it also holds every read, write and connect to
the :func:`deadline` in force, so a request ends when
its whole time is up however slowly a server drips its headers or body, or a resolver
answers (the lookup runs in a thread the request stops waiting for). A refusal raises
:class:`~evidence_bench.errors.BlockedAddressError`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import httpcore
import httpx

from evidence_bench.errors import BlockedAddressError

__all__ = [
    "ANY_ADDRESS", "OPEN_WEB", "AddressPolicy", "GuardedTransport", "Resolver", "clamp",
    "deadline", "remaining", "system_resolver",
]  # fmt: skip

#: ``(host, port) -> addresses``: what a host name resolves to (a stub in tests).
Resolver = Callable[[str, int], Sequence[str]]

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _embedded(ip: _IP) -> _IP:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), else ``ip``."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip.sixtofour is not None:
            return ip.sixtofour
    return ip


def _kind(address: str) -> str | None:
    """Why ``address`` is not on the open web ("loopback", "private", ...), or None."""
    try:
        ip = _embedded(ipaddress.ip_address(address.split("%", 1)[0]))
    except ValueError:
        return "not an IP address"
    for kind, test in (
        ("loopback", ip.is_loopback),
        ("unspecified", ip.is_unspecified),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("private", ip.is_private),
        ("reserved", ip.is_reserved),
    ):
        if test:
            return kind
    return None if ip.is_global else "not globally routable"


def _literal(host: str) -> str | None:
    """The address ``host`` spells, in any form the C library's parser accepts (``127.1``,
    ``2130706433``, ``0x7f.1``), or None for a name."""
    bare = host.strip("[]")
    try:
        return str(ipaddress.ip_address(bare.split("%", 1)[0]))
    except ValueError:
        pass
    try:
        return socket.inet_ntoa(socket.inet_aton(bare))
    except (OSError, ValueError):
        return None


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for ``host``, in its order, each once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise httpcore.ConnectError(f"cannot resolve {host!r}: {exc}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """Which destinations a fetch may reach: the open web only, or (``allow_private``)
    any address."""

    allow_private: bool = False

    def check_address(self, address: str, host: str) -> None:
        """Raise BlockedAddressError when ``address`` (what ``host`` led to) is refused."""
        if self.allow_private:
            return
        if (kind := _kind(address)) is not None:
            shown = host if host == address else f"{host} ({address})"
            raise BlockedAddressError(f"{shown} is a {kind} address, not the open web")

    def check_host(self, host: str) -> None:
        """Raise BlockedAddressError when ``host`` as written is a refused address or a
        ``localhost`` name (names are checked again once resolved)."""
        if self.allow_private:
            return
        name = host.strip("[]").lower().rstrip(".")
        if name == "localhost" or name.endswith(".localhost"):
            raise BlockedAddressError(f"{host} is a loopback name, not the open web")
        if (address := _literal(name)) is not None:
            self.check_address(address, host)

    def destination(self, host: str, port: int, resolver: Resolver) -> str:
        """The address to connect to for ``host``: resolved, every answer checked (one
        refused answer refuses the host: a name must not mix the web with the inside)."""
        self.check_host(host)
        literal = _literal(host)
        addresses = [literal] if literal is not None else list(resolver(host, port))
        if not addresses:
            raise httpcore.ConnectError(f"{host!r} resolves to no address")
        for address in addresses:
            self.check_address(address, host)
        return addresses[0]

    def check_peer(self, peer: object, host: str) -> None:
        """Raise BlockedAddressError when the connected socket's peer is refused."""
        if isinstance(peer, tuple) and peer and isinstance(peer[0], str):
            self.check_address(peer[0], host)


#: The default policy: the open web only.
OPEN_WEB = AddressPolicy()
#: No address refused: a server of one's own, the user's own Brave endpoint.
ANY_ADDRESS = AddressPolicy(allow_private=True)


# -- the deadline ---------------------------------------------------------------------------

_DEADLINE: ContextVar[float | None] = ContextVar("evidence_bench_deadline", default=None)


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Within the block, every read, write and connect of a guarded transport ends by
    ``seconds`` from now (a nested deadline can only shorten the one outside)."""
    end = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(end, outer))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining() -> float | None:
    """Seconds left of the deadline in force (None: none is)."""
    end = _DEADLINE.get()
    return None if end is None else end - time.monotonic()


def clamp(timeout: float | None, error: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the deadline in force; ``error`` once it passed."""
    left = remaining()
    if left is None:
        return timeout
    if left <= 0:
        raise error("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


# -- network backends -----------------------------------------------------------------------


class _Stream(httpcore.NetworkStream):
    """A socket stream whose every read and write ends by the deadline."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, clamp(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, clamp(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(
            ssl_context, server_hostname, clamp(timeout, httpcore.ConnectTimeout)
        )
        return _Stream(inner)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


def _bounded_destination(
    policy: AddressPolicy, host: str, port: int, resolver: Resolver, timeout: float | None
) -> str:
    """``policy.destination(host, port, resolver)`` within ``timeout`` seconds, part of the
    request's deadline (an address literal needs no lookup); raises
    :class:`httpcore.ConnectTimeout` when the time runs out. ``getaddrinfo`` takes no
    timeout: the lookup runs in a daemon thread, and one that hangs is left behind, never
    joined."""
    if timeout is None or _literal(host) is not None:
        return policy.destination(host, port, resolver)
    outcome: list[str | BaseException] = []
    done = threading.Event()

    def lookup() -> None:
        try:
            outcome.append(policy.destination(host, port, resolver))
        except BaseException as exc:  # raised again in the caller's thread
            outcome.append(exc)
        done.set()

    threading.Thread(target=lookup, name=f"resolve {host}", daemon=True).start()
    if not done.wait(timeout):
        raise httpcore.ConnectTimeout(f"resolving {host!r} took past the request's deadline")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


class _Backend(httpcore.NetworkBackend):
    """Resolves and checks the host (within the deadline), connects to the checked address,
    checks the peer."""

    def __init__(
        self, policy: AddressPolicy, resolver: Resolver, inner: httpcore.NetworkBackend
    ) -> None:
        self._policy = policy
        self._resolver = resolver
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        limit = clamp(timeout, httpcore.ConnectTimeout)
        address = _bounded_destination(self._policy, host, port, self._resolver, limit)
        stream = self._inner.connect_tcp(
            address, port, clamp(timeout, httpcore.ConnectTimeout), local_address, socket_options
        )
        try:
            self._policy.check_peer(stream.get_extra_info("server_addr"), host)
        except BlockedAddressError:
            stream.close()
            raise
        return _Stream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        raise BlockedAddressError(f"a Unix socket ({path}) is not the open web")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# -- httpx transports on the guarded pool ---------------------------------------------------


@contextlib.contextmanager
def _httpx_errors() -> Iterator[None]:
    try:
        yield
    except (
        httpcore.TimeoutException,
        httpcore.NetworkError,
        httpcore.ProtocolError,
        httpcore.ProxyError,
        httpcore.UnsupportedProtocol,
    ) as exc:
        raise _translated(exc) from exc


def _translated(exc: Exception) -> httpx.TransportError:
    """httpcore's error as httpx's of the same name (httpx's public classes)."""
    for kind in type(exc).__mro__:
        target = getattr(httpx, kind.__name__, None)
        if isinstance(target, type) and issubclass(target, httpx.TransportError):
            return target(str(exc))
    return httpx.TransportError(str(exc))


def _core_request(request: httpx.Request) -> httpcore.Request:
    return httpcore.Request(
        method=request.method,
        url=httpcore.URL(
            scheme=request.url.raw_scheme,
            host=request.url.raw_host,
            port=request.url.port,
            target=request.url.raw_path,
        ),
        headers=request.headers.raw,
        content=request.stream,
        extensions=request.extensions,
    )


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        with _httpx_errors():
            yield from self._stream

    def close(self) -> None:
        if hasattr(self._stream, "close"):
            self._stream.close()


class GuardedTransport(httpx.BaseTransport):
    """httpx's socket transport with the destination ``policy`` and the deadline held on
    every connection (``resolver`` and ``backend``, the sockets under the checks: stubs in
    tests). No proxy: the policy checks the address it connects to, and a proxy would be
    that address."""

    def __init__(
        self,
        policy: AddressPolicy = OPEN_WEB,
        *,
        resolver: Resolver = system_resolver,
        backend: httpcore.NetworkBackend | None = None,
        max_connections: int = 10,
    ) -> None:
        inner = backend or httpcore.SyncBackend()
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=max_connections,
            network_backend=_Backend(policy, resolver, inner),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with _httpx_errors():
            answer = self._pool.handle_request(_core_request(request))
        assert isinstance(answer.stream, Iterable)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self._pool.close()
