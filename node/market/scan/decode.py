"""Bounded decoding of what a skill assembles at run time, so the rules can read it.

Attackers do not write ``curl … | sh``; they write it base64-encoded, base85 + XOR with
a key in plain sight, gzip- or zlib-compressed inside base64, as ``"cu" + "rl"``, from
shell variables (``a="cu"; b="rl"; $a$b …``), in rot13, reversed (``[::-1]``), or
interleaved with noise and sliced (``s[::2]``), or as ``chr(99)+chr(117)…``. ``decoded_texts`` returns the
plain texts a file's lines turn into under those transformations, each with the line it
came from and how it was obtained, so the caller runs the same rules on them.

Hostile input: every pattern is bounded, each decoded text is cut to
``MAX_DECODED_CHARS``, one skill (all its files, through one ``Budget``) yields at most
``MAX_CANDIDATES`` texts, ``MAX_TOTAL_CHARS`` characters and ``MAX_WORK_BYTES`` of
decoding work, nested encodings are followed ``MAX_DEPTH`` levels deep, and at most
``MAX_KEYS`` XOR keys are tried. Compressed data is inflated to at most
``MAX_INFLATED_BYTES`` and ``MAX_INFLATE_RATIO`` times its compressed size (a
decompression bomb yields its first few kilobytes, never more), counted as work. Only texts that are mostly printable count, and an
assembled string (concatenated, reversed, sliced) only when it looks like a command or
an address (a space, ``/``, ``:`` or ``|``), so ordinary string handling does not spend
the budget. A budget spent to the end is itself reported by the caller (``Budget.full``):
padding a skill with encoded text cannot hide the payload behind it silently.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import zlib
from dataclasses import dataclass

MAX_DECODED_CHARS = 8000
MAX_CANDIDATES = 128
MAX_TOTAL_CHARS = 128 * 1024
MAX_DEPTH = 3
MAX_KEYS = 4
MAX_LITERALS = 64
MAX_WORK_BYTES = 2 * 1024 * 1024  # bytes decoded or XORed per skill, all attempts together
MAX_INFLATED_BYTES = MAX_DECODED_CHARS
MAX_INFLATE_RATIO = 64  # honest text compresses 3-10x; a bomb compresses 1000x
MAX_SHELL_VARIABLES = 256
ASSEMBLED = re.compile(r"[\s/:|]")
PRINTABLE_RATIO = 0.9

LITERAL = re.compile(r"""b?(?:"([^"\\\n]{1,4000})"|'([^'\\\n]{1,4000})')""")
B64 = re.compile(r"[A-Za-z0-9+/]{16,8000}={0,2}")
B85_CALL = re.compile(r"\b(?:b85decode|a85decode|base85|ascii85)\b", re.IGNORECASE)
HEX = re.compile(r"(?:\\x[0-9a-fA-F]{2}){8,2000}|\b[0-9a-fA-F]{32,8000}\b")
XOR_INT = re.compile(r"\^\s{0,3}(0x[0-9a-fA-F]{1,2}|\d{1,3})\b")
XOR_KEY = re.compile(r"""\b\w{0,20}key\w{0,20}\s{0,3}=\s{0,3}b?["']([^"'\n]{1,32})["']""", re.IGNORECASE)
SHORT_ASSIGNMENT = re.compile(r"""\b\w{1,20}\s{0,3}=\s{0,3}b?["']([^"'\n]{1,16})["']""")
XOR_WORD = re.compile(r"\^|\bxor\b", re.IGNORECASE)
REVERSE = re.compile(r"\[\s{0,2}:\s{0,2}:\s{0,2}-1\s{0,2}\]|\.reverse\s{0,2}\(|\bstrrev\b|\|\s{0,3}rev\b|\breverse\b",
                     re.IGNORECASE)
SLICE = re.compile(r"\[\s{0,2}(\d{0,2})\s{0,2}:\s{0,2}:\s{0,2}([2-9])\s{0,2}\]")
CONCAT = re.compile(r"""["']\s{0,3}(?:\+|\.|,)\s{0,3}b?["']""")
CHAR_CODES = re.compile(r"\b(?:chr|fromcharcode)\s{0,2}\(\s{0,2}(\d{1,3}(?:\s{0,2},\s{0,2}\d{1,3}){0,400})",
                        re.IGNORECASE)
CHR_NUMBER = re.compile(r"\bchr\s{0,2}\(\s{0,2}(\d{1,3})\s{0,2}\)", re.IGNORECASE)
# ``name=value`` (value quoted or a bare word) and the ``$name`` / ``${name}`` that use them.
SHELL_ASSIGNMENT = re.compile(r"""(?:^|[\s;&(])(?:export\s{1,4}|local\s{1,4}|set\s{1,4})?([A-Za-z_][A-Za-z0-9_]{0,30})="""
                              r"""(?:"([^"$`\\\n]{1,40})"|'([^'\n]{1,40})'|([^\s"'`$;&|()<>]{1,40}))""")
SHELL_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]{0,30})\}?")
ADJACENT_REFERENCES = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]{0,30}\}?[\w.-]{0,4}\$\{?[A-Za-z_]")
ROT13 = re.compile(r"\brot[_-]?13\b|\btr\s{1,4}['\"]?a-za-z['\"]?\s{1,4}['\"]?n-za-mn-za-m", re.IGNORECASE)
COMPRESSED_MAGIC = (b"\x1f\x8b", b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda")
PATTERNS = (SHELL_ASSIGNMENT, SHELL_REFERENCE, ADJACENT_REFERENCES, ROT13, ASSEMBLED, LITERAL, B64, B85_CALL, HEX, XOR_INT, XOR_KEY, SHORT_ASSIGNMENT, XOR_WORD, REVERSE, SLICE, CONCAT, CHAR_CODES, CHR_NUMBER)


# How a text was put together from pieces a person can read; only a command or an address counts.
ASSEMBLED_HOWS = ("concatenation", "reversed", "sliced", "shell variables", "rot13")


@dataclass(frozen=True)
class Decoded:
    line: int
    how: str
    text: str


def printable(data: bytes | str) -> str | None:
    """``data`` as text if it is mostly printable, else None."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    else:
        text = data
    if len(text) < 4:
        return None
    good = sum(1 for char in text if char.isprintable() or char in "\n\t\r")
    return text if good / len(text) >= PRINTABLE_RATIO else None


def _b64(run: str) -> bytes:
    try:
        padded = run.rstrip("=")
        return base64.b64decode(padded + "=" * (-len(padded) % 4))
    except (binascii.Error, ValueError):
        return b""


def _b85(run: str) -> bytes:
    for decoder in (base64.b85decode, base64.a85decode):
        try:
            return decoder(run.encode("ascii", "ignore"))
        except (binascii.Error, ValueError):
            continue
    return b""


def _hex(run: str) -> bytes:
    digits = run.replace("\\x", "")
    try:
        return bytes.fromhex(digits[: len(digits) // 2 * 2])
    except ValueError:
        return b""


def inflate(data: bytes) -> bytes:
    """gzip or zlib ``data`` inflated, at most ``MAX_INFLATED_BYTES`` and ``MAX_INFLATE_RATIO``
    times its size; b"" if it is neither or is broken. Never inflates more than that."""
    if not data.startswith(COMPRESSED_MAGIC):
        return b""
    cap = min(MAX_INFLATED_BYTES, MAX_INFLATE_RATIO * len(data))
    window = 16 + zlib.MAX_WBITS if data.startswith(b"\x1f\x8b") else zlib.MAX_WBITS
    try:
        return zlib.decompressobj(window).decompress(data, cap)
    except zlib.error:
        return b""


def _xor(data: bytes, key: bytes) -> bytes:
    return bytes(byte ^ key[index % len(key)] for index, byte in enumerate(data))


def _keys(text: str) -> list[bytes]:
    """XOR keys written in the file: ``^ 0x42`` or ``key = "…"``."""
    keys: list[bytes] = []
    for match in XOR_INT.finditer(text):
        value = int(match.group(1), 0)
        if 0 < value < 256 and bytes([value]) not in keys:
            keys.append(bytes([value]))
        if len(keys) >= MAX_KEYS:
            return keys
    for pattern in (XOR_KEY, SHORT_ASSIGNMENT):
        for match in pattern.finditer(text):
            key = match.group(1).encode("utf-8", "ignore")
            if key and key not in keys:
                keys.append(key)
            if len(keys) >= MAX_KEYS:
                return keys
    return keys


class Budget:
    """What one skill may cost the decoder; shared by the calls for each of its files."""

    def __init__(self) -> None:
        self.chars = 0
        self.work = 0
        self.found: list[Decoded] = []

    def full(self) -> bool:
        return (len(self.found) >= MAX_CANDIDATES or self.chars >= MAX_TOTAL_CHARS
                or self.work >= MAX_WORK_BYTES)

    def add(self, line: int, how: str, text: str) -> bool:
        if self.full():
            return False
        text = text[:MAX_DECODED_CHARS]
        if how.startswith(ASSEMBLED_HOWS) and not ASSEMBLED.search(text):
            return False
        self.chars += len(text)
        self.found.append(Decoded(line, how, text))
        return True


def _binary_candidates(line: str, b85: bool) -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for match in B64.finditer(line):
        run = match.group()[:MAX_DECODED_CHARS * 2]
        if not (any(c.isdigit() for c in run) or any(c in "+/=" for c in run)) or run.isalpha():
            continue
        out.append(("base64", _b64(run)))
    if b85:
        for match in LITERAL.finditer(line):
            out.append(("base85", _b85((match.group(1) or match.group(2) or "")[:MAX_DECODED_CHARS * 2])))
    for match in HEX.finditer(line):
        out.append(("hex", _hex(match.group()[:MAX_DECODED_CHARS * 4])))
    return [(how, data) for how, data in out if data][:MAX_LITERALS]


def _expand(budget: Budget, number: int, how: str, text: str, keys: list[bytes], depth: int) -> None:
    """Decode binary-looking runs in ``text`` (and XOR them with the file's keys), nested."""
    if depth >= MAX_DEPTH or budget.full():
        return
    for step, data in _binary_candidates(text, B85_CALL.search(text) is not None or how != "line"):
        budget.work += len(data) * (1 + len(keys))
        if budget.full():
            return
        tried = [(step, data)] + [(f"{step}+xor", _xor(data[:MAX_DECODED_CHARS], key)) for key in keys]
        inflated = inflate(data)
        if inflated:
            budget.work += len(inflated)
            kind = "gzip" if data.startswith(COMPRESSED_MAGIC[0]) else "zlib"
            tried.insert(0, (f"{step}+{kind}", inflated))
        for label, candidate in tried:
            plain = printable(candidate[:MAX_DECODED_CHARS])
            if plain is None:
                continue
            name = label if how == "line" else f"{how}>{label}"
            if budget.add(number, name, plain):
                _expand(budget, number, name, plain, keys, depth + 1)


def _shell_variables(text: str) -> dict[str, str]:
    """Short values assigned to shell variables in the file (the last one wins)."""
    found: dict[str, str] = {}
    for match in SHELL_ASSIGNMENT.finditer(text[:MAX_TOTAL_CHARS]):
        value = match.group(2) or match.group(3) or match.group(4) or ""
        found[match.group(1)] = value
        if len(found) >= MAX_SHELL_VARIABLES:
            break
    return found


def _expand_variables(line: str, variables: dict[str, str]) -> str | None:
    """``line`` with the file's variables substituted, if it joins two of them (``$a$b``)."""
    if not ADJACENT_REFERENCES.search(line):
        return None
    known = [match for match in SHELL_REFERENCE.finditer(line) if match.group(1) in variables]
    if len(known) < 2:
        return None
    return SHELL_REFERENCE.sub(lambda match: variables.get(match.group(1), match.group()), line)


def _literals(line: str) -> list[str]:
    return [match.group(1) or match.group(2) or "" for match in LITERAL.finditer(line)][:MAX_LITERALS]


def decoded_texts(text: str, budget: Budget | None = None) -> list[Decoded]:
    """The plain texts one file's lines decode or assemble to (bounded; see the module).

    Pass the same ``budget`` for every file of one skill; it keeps every text found."""
    lines = text.split("\n")
    keys = _keys(text[:MAX_TOTAL_CHARS * 2]) if XOR_WORD.search(text) else []
    variables = _shell_variables(text) if ADJACENT_REFERENCES.search(text) else {}
    rot13 = ROT13.search(text) is not None
    budget = budget if budget is not None else Budget()
    first = len(budget.found)
    for index, line in enumerate(lines):
        if budget.full():
            break
        number = index + 1
        line = line[:MAX_DECODED_CHARS * 2]
        _expand(budget, number, "line", line, keys, 0)
        literals = _literals(line)
        if variables:
            expanded = _expand_variables(line, variables)
            if expanded is not None:
                budget.add(number, "shell variables", expanded)
        if rot13:
            for literal in literals[:8]:
                budget.add(number, "rot13", codecs.decode(literal, "rot13"))
        if len(literals) >= 2 and CONCAT.search(line):
            budget.add(number, "concatenation", "".join(literals))
        if literals and REVERSE.search(line):
            budget.add(number, "reversed", "".join(literals)[::-1])
            budget.add(number, "reversed", " ".join(literal[::-1] for literal in literals))
        slices = list(SLICE.finditer(line))[:4]
        if slices:
            # The sliced string may have been assigned a few lines above.
            nearby = literals or _literals("\n".join(lines[max(0, index - 3):index]))
            for match in slices:
                start, step = int(match.group(1) or 0), int(match.group(2))
                for literal in nearby[:8]:
                    budget.add(number, f"sliced [{start}::{step}]", literal[start::step])
        codes = [int(value) for match in CHAR_CODES.finditer(line)
                 for value in re.split(r"\s{0,2},\s{0,2}", match.group(1))]
        if len(codes) >= 4:
            budget.add(number, "character codes",
                       "".join(chr(code) for code in codes[:MAX_DECODED_CHARS] if code < 0x110000))
    return budget.found[first:]
