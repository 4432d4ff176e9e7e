"""Random draws fixed by what they are about: one derivation for every draw a run makes.

A draw is seeded by a tuple of plain values, the run's seed first and then what the draw is
for, e.g. ``(seed, query_id, round, doc key)`` for a simulated user's judgment or
``(seed, policy, query_id, round)`` for the shuffled control. The tuple is encoded as JSON
(unambiguous: a ``|`` in a query id cannot shift fields) and hashed with SHA-256; the first
8 bytes of the digest, big-endian, seed a :class:`random.Random`. Python's salted
:func:`hash` is never used, so the same tuple gives the same draw in any process, on any
number of workers, whatever else the run contains; and a different seed gives other draws.
"""

from __future__ import annotations

import hashlib
import json
import random

__all__ = ["derivation", "derived_random", "derived_seed"]


def derived_seed(*parts: str | int) -> int:
    """A 64-bit seed fixed by ``parts`` (JSON-encoded, SHA-256), stable across processes."""
    digest = hashlib.sha256(json.dumps(list(parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def derived_random(*parts: str | int) -> random.Random:
    """A generator seeded by :func:`derived_seed` of ``parts``."""
    return random.Random(derived_seed(*parts))


def derivation(*names: str) -> str:
    """How :func:`derived_seed` of the parts ``names`` is computed, for the manifest."""
    return f"sha256(json.dumps([{', '.join(names)}]))[:8], big-endian"
