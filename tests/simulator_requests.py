"""Seeded search requests for the simulator, shaped like a run's and beyond it, and a small
collection of awkward documents: what `test_simulator_answers.py` pins byte for byte and
`benchmarks/bench_simulator.py` times.

A request is ``(simulator name, params)``; :func:`simulators` names the simulators.
"""

from __future__ import annotations

import random
from pathlib import Path

from evidence_bench.collections.beir import Collection, Document, Query, load_collection
from evidence_bench.web.simulator import BraveSimulator

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("cranfield", "cacm")

#: Each one tries a corner of analysis, windows or rendering: HTML and entities, runs split
#: by punctuation and underscores, case and non-ASCII letters, a word longer than a snippet,
#: a title and no text, odd white space, long texts with many windows.
_AWKWARD = {
    "1": (
        'Heat & mass "transfer"',
        "The <script>alert(1)</script> flow-field of (boundary layer), Mach-17 at 1.5 "
        "x_y naïve Über İstanbul STRASSE straße heat-flux &amp; &lt;b&gt; <b>bold</b> heat.",
    ),
    "2": ("", "-".join(["heat", "flux", "Mach"] * 30) + " tail words after heat"),
    "3": ("Boundary layer heat", ""),
    "4": ("Spaces", "heat\tflux\n\nboundary   layer \u00a0 mach\u2003flow heat heat heat"),
    "5": ("", "heat " + "x" * 310),
    "6": ("", "<em>Flux</em>&nbsp;layers of heat; the flux of heat; heat's flux."),
}
_VOCABULARY = [
    "heat", "flux", "boundary", "layer", "mach", "flow", "pressure", "shock", "wave",
    "supersonic", "the", "of", "and", "a", "in", "Heat", "FLUX", "Boundary-Layer", "(flow)",
    "wave,", "shock.", "17", "1.5", "naïve", "Über", "straße", "x_y", "<b>",
]  # fmt: skip


def awkward_collection() -> Collection:
    """Six hand-made documents and, from a fixed seed, six long ones of the vocabulary."""
    documents = {
        doc_id: Document(doc_id, title, text) for doc_id, (title, text) in _AWKWARD.items()
    }
    rng = random.Random(7)
    for n in range(7, 13):
        words = [rng.choice(_VOCABULARY) for _ in range(rng.randrange(40, 400))]
        documents[str(n)] = Document(str(n), " ".join(words[:5]), " ".join(words))
    return Collection("Awkward", documents, {"q": Query("q", "heat flux")}, {"q": {"1": 1}})


def simulators() -> dict[str, BraveSimulator]:
    """The shipped collections' simulators, and the awkward collection's with 0-5 extra
    snippets."""
    made = {
        name: BraveSimulator(load_collection(ROOT / "collections" / name, name=name))
        for name in SHIPPED
    }
    awkward = awkward_collection()
    for extra in (0, 1, 3, 5):
        made[f"awkward-{extra}"] = BraveSimulator(awkward, extra_snippet_count=extra)
    return made


def search_requests(
    sims: dict[str, BraveSimulator], n: int, seed: int = 13, *, awkward: bool = True
) -> list[tuple[str, dict[str, str]]]:
    """``n`` valid search requests, the same for a seed: mostly a query of a shipped
    collection with words of one of its documents appended (as a refined query is), 1-20
    results a page at offsets 0-9, some with extra snippets or without decorations; every
    fourth one to the awkward collection when ``awkward``."""
    rng = random.Random(seed)
    names = [name for name in SHIPPED if name in sims]
    made: list[tuple[str, dict[str, str]]] = []
    while len(made) < n:
        if awkward and len(made) % 4 == 3:
            name = f"awkward-{rng.choice((0, 1, 3, 5))}"
            words = rng.sample(_VOCABULARY, rng.randrange(1, 8))
        else:
            name = names[len(made) % len(names)]
            collection = sims[name].collection
            query = collection.queries[rng.choice(sorted(collection.queries))]
            doc = collection.documents[rng.choice(sorted(collection.documents))]
            found = f"{doc.title} {doc.text}".split()
            extra = rng.sample(found, min(len(found), rng.choice((0, 0, 2, 3, 4, 8))))
            words = [*query.text.split()[:40], *extra][:50]
        q = " ".join(words)[:400].strip() or "heat"
        params = {
            "q": q,
            "count": str(rng.choice((20, 20, 20, 10, 5, 1, rng.randrange(1, 21)))),
            "offset": str(rng.choice((0, 0, 0, 1, 2, 9))),
        }
        if rng.random() < 0.3:
            params["extra_snippets"] = "true"
        if rng.random() < 0.2:
            params["text_decorations"] = "false"
        made.append((name, params))
    return made
