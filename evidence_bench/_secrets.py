"""The API key, redacted from everything the project writes or prints.

:func:`redact` replaces each spelling of a secret a reader can decode (verbatim,
percent-encoded, JSON-escaped, HTML entities, base64) by :data:`KEY_PLACEHOLDER`, and a
word that still decodes to one whole; :func:`holds_secret` is the last check before a
cassette is written. The secret is ``BRAVE_SEARCH_API_KEY``'s unless given (``secrets=``).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import html
import json
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = [
    "KEY_ENV", "KEY_PLACEHOLDER", "holds_secret", "known_secrets", "redact", "redact_json",
    "secret_forms",
]  # fmt: skip

#: Where the command lines read the Brave API key.
KEY_ENV = "BRAVE_SEARCH_API_KEY"
#: What a secret is replaced with in everything the project writes.
KEY_PLACEHOLDER = "REDACTED-API-KEY"
#: What ends a word of the fallback (:func:`_fallback`): white space, quotes, angle brackets
#: and the backslash, so a replaced word never takes a JSON escape or a tag with it.
_WORD = re.compile(r"[^\s\"'<>\\]+")
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_HEX_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_JSON_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})")


def known_secrets() -> list[str]:
    """The key in the environment (none when it is unset or blank)."""
    env = os.environ.get(KEY_ENV, "").strip()
    return [env] if env else []


def _percent_forms(secret: str) -> set[str]:
    encoded = {quote(secret, safe=""), quote(secret), quote_plus(secret)}
    encoded.add("".join(f"%{byte:02X}" for byte in secret.encode()))
    return encoded | {_HEX_ESCAPE.sub(lambda m: m.group().lower(), form) for form in encoded}


def _json_forms(secret: str) -> set[str]:
    escaped = json.dumps(secret)[1:-1]
    every = "".join(f"\\u{ord(c):04x}" for c in secret)
    forms = {escaped, escaped.replace("/", "\\/"), json.dumps(secret, ensure_ascii=False)[1:-1]}
    return forms | {every, every.upper().replace("\\U", "\\u")}


def _entity_forms(secret: str) -> set[str]:
    forms = {html.escape(secret), html.escape(secret, quote=False)}
    forms.add("".join(f"&#{ord(c)};" for c in secret))
    forms.add("".join(f"&#x{ord(c):x};" for c in secret))
    forms.add("".join(f"&#x{ord(c):X};" for c in secret))
    return forms


def _base64_forms(secret: str) -> set[str]:
    """The characters of the key's base64 that no neighbouring byte changes, at each of the
    three alignments it may have inside a longer encoded text (standard and URL-safe)."""
    raw = secret.encode()
    forms = set()
    for lead in range(3):
        encoded = base64.b64encode(bytes(lead) + raw).decode()
        core = encoded[(lead * 8 + 5) // 6 : (lead + len(raw)) * 8 // 6]
        if len(core) >= 8:  # shorter, it would match unrelated base64
            forms |= {core, core.replace("+", "-").replace("/", "_")}
    return forms


@functools.lru_cache(maxsize=64)
def _forms(secrets: tuple[str, ...]) -> tuple[str, ...]:
    forms: set[str] = set()
    for secret in secrets:
        forms |= {secret} | _percent_forms(secret) | _json_forms(secret)
        forms |= _entity_forms(secret) | _base64_forms(secret)
    return tuple(sorted(forms, key=lambda form: (-len(form), form)))


def secret_forms(secrets: Sequence[str]) -> list[str]:
    """Every spelling of each secret :func:`redact` replaces; longest first, so no form is
    left half-replaced by a shorter one."""
    return list(_forms(tuple(sorted({s for s in secrets if s}))))


def _decodings(text: str) -> set[str]:
    """``text`` as a reader may decode it: percent-encoding, HTML entities, JSON escapes,
    each alone and the first two in either order."""
    decoded = {text, unquote(text), unquote_plus(text), html.unescape(text)}
    decoded |= {html.unescape(unquote(text)), unquote(html.unescape(text))}
    if "\\u" in text:
        decoded.add(_JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text))
    return decoded


def _base64_decoded(word: str) -> str:
    if len(word) < 8 or not _BASE64.fullmatch(word):
        return ""
    for variant in (word, word.replace("-", "+").replace("_", "/")):
        with contextlib.suppress(binascii.Error, ValueError):
            return base64.b64decode(variant + "=" * (-len(variant) % 4)).decode("latin-1")
    return ""


def _decodes_to(text: str, secrets: Iterable[str]) -> bool:
    views = _decodings(text)
    return any(secret in view for view in views for secret in secrets)


def _fallback(text: str, secrets: Sequence[str]) -> str:
    """Each word of ``text`` that decodes to a secret, replaced whole."""

    def word(match: re.Match[str]) -> str:
        found = match.group()
        held = _decodes_to(found, secrets) or any(s in _base64_decoded(found) for s in secrets)
        return KEY_PLACEHOLDER if held else found

    return _WORD.sub(word, text)


def redact(text: str, secrets: Sequence[str] | None = None) -> str:
    """``text`` with every spelling of each secret (:func:`known_secrets` when None)
    replaced by :data:`KEY_PLACEHOLDER`. Text without a secret comes back unchanged."""
    wanted = tuple(sorted({s for s in (known_secrets() if secrets is None else secrets) if s}))
    if not wanted or not text:
        return text
    for form in _forms(wanted):
        if form in text:
            text = text.replace(form, KEY_PLACEHOLDER)
    if _decodes_to(text, wanted) or any(
        s in _base64_decoded(w) for w in _BASE64.findall(text) for s in wanted
    ):
        text = _fallback(text, wanted)
    return text


def redact_json(value: Any, secrets: Sequence[str] | None = None) -> Any:
    """A JSON document (dicts, lists, strings, numbers) with :func:`redact` applied to each
    string, keys too: a string's own escapes (a key echoed JSON-escaped) are escaped again
    in the document's text, where redacting the text would miss them."""
    wanted = list(known_secrets() if secrets is None else secrets)
    if not any(wanted):
        return value
    if isinstance(value, str):
        return redact(value, wanted)
    if isinstance(value, dict):
        return {redact_json(k, wanted): redact_json(v, wanted) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(item, wanted) for item in value]
    return value


def holds_secret(text: str, secrets: Sequence[str]) -> bool:
    """Whether a file's JSON ``text`` holds any of ``secrets`` in a form a reader could
    decode: verbatim, or in any string of the document once decoded from JSON escapes
    (``\\u0042``), percent-encoding of either case, HTML entities (``&#43;``) or base64 (a
    page body). A string that is itself JSON (a recorded body) is read as a document too.

    Raises :class:`RecursionError` for a body nested past the JSON parser's depth, which it
    cannot check: the callers refuse to write it."""
    wanted = [secret for secret in secrets if secret]
    if not wanted:
        return False
    if any(secret in text for secret in wanted):
        return True
    try:
        document = json.loads(text)
    except ValueError:
        return False
    pending: list[Any] = [document]
    while pending:
        value = pending.pop()
        if isinstance(value, dict):
            pending.extend(value.values())
        elif isinstance(value, list):
            pending.extend(value)
        elif isinstance(value, str):
            if _decodes_to(value, wanted):
                return True
            if value[:1] in "{[" and value[-1:] in "}]":
                with contextlib.suppress(ValueError):
                    pending.append(json.loads(value))
            elif len(value) >= 16 and any(s in _base64_decoded(value) for s in wanted):
                return True
    return False
