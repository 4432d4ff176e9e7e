"""The flags of every headless Chromium the benchmarks and the browser tests start.

Offline: no first-run, sync, component or background fetches, and every host name resolved
to nothing but 127.0.0.1 (``--host-resolver-rules``), so a page, a font or a prefetch can
reach no address but loopback (file:// pages need none).
"""

from __future__ import annotations

__all__ = ["FLAGS"]

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)
