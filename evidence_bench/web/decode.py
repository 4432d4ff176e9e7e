"""A fetched page's bytes as text, by the HTML standard's encoding sniffing.

:func:`decode_html` is the decode step of the page pipeline
(:mod:`evidence_bench.web.page_text`): the labels are read as the WHATWG Encoding Standard
maps them ("Determining the character encoding"), and a body that is no text in any
plausible encoding gives None (``undecodable``).
"""

from __future__ import annotations

import codecs
import re

__all__ = ["decode_html"]

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.I)
_CT_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9._:-]+)", re.I)
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)  # fmt: skip
# C0 controls other than tab, newline, form feed and carriage return: text has few of them.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f]")


def _codec(name: str) -> str | None:
    """Python's codec for the charset label ``name``; Latin-1's labels (``iso-8859-1``,
    ``latin1``, ...) give windows-1252, as the WHATWG Encoding Standard maps them and
    browsers decode them: pages so labelled use its 0x80-0x9F (curly quotes, dashes, the
    euro), which Latin-1 reads as C1 control characters. (``us-ascii`` stays strict ASCII,
    so a UTF-8 page so labelled falls through to UTF-8.)"""
    try:
        codec = codecs.lookup(name.strip().lower()).name
    except (LookupError, ValueError):
        return None
    return "cp1252" if codec == "iso8859-1" else codec


def _whatwg_1252(error: UnicodeError) -> tuple[str, int]:
    """WHATWG's windows-1252 where Python's cp1252 has no character (0x81, 0x8D, 0x8F, 0x90,
    0x9D): the code point of the byte's value, as Latin-1 gives."""
    if not isinstance(error, UnicodeDecodeError):
        raise error
    undefined = error.object[error.start : error.end]
    if any(byte not in b"\x81\x8d\x8f\x90\x9d" for byte in undefined):
        raise error
    return undefined.decode("latin-1"), error.end


codecs.register_error("evidence_bench.whatwg-1252", _whatwg_1252)


def _plausible(text: str, body: bytes) -> bool:
    """Decoded text is text: at most 1% C0 control characters (binary data has many), and
    markup whose bytes hold a ``<`` still holds one once decoded (a UTF-16 label on a UTF-8
    body decodes without error into CJK mojibake, every ``<`` gone)."""
    head = text[:100_000]
    if len(_CONTROL.findall(head)) > max(1, len(head) // 100):
        return False
    return "<" in text[:4096] or b"<" not in body[:4096]


def decode_html(body: bytes, content_type: str | None = None) -> str | None:
    """The body as text, or None when it is not text in any plausible encoding.

    The encoding is the first that decodes the bytes strictly into plausible text, in the
    order of the HTML standard's sniffing (WHATWG, "Determining the character encoding"):
    a byte order mark, the Content-Type's ``charset``, a ``<meta charset>`` in the first
    4 KiB, UTF-8, then the standard's default, windows-1252; past those, charset-normalizer's
    guess. An unknown charset name is skipped. Plausible text has at most 1% C0 control
    characters, which binary data fails.
    """
    if not body:
        return ""
    names: list[str] = []
    for bom, name in _BOMS:
        if body.startswith(bom):
            names.append(name)
            break
    if content_type and (match := _CT_CHARSET.search(content_type)):
        names.append(match.group(1))
    if meta := _META_CHARSET.search(body[:4096]):
        names.append(meta.group(1).decode("ascii", "replace"))
    names += ["utf-8", "windows-1252"]
    for name in names:
        codec = _codec(name)
        if codec is None:
            continue
        errors = "evidence_bench.whatwg-1252" if codec == "cp1252" else "strict"
        try:
            text = body.decode(codec, errors)
        except (UnicodeDecodeError, LookupError):
            continue
        if _plausible(text, body):
            return text.removeprefix("\ufeff")
    from charset_normalizer import from_bytes

    best = from_bytes(body[:1_000_000]).best()
    if best is None or best.encoding is None:
        return None
    try:
        text = body.decode(best.encoding)
    except (UnicodeDecodeError, LookupError):
        return None
    return text if _plausible(text, body) else None
