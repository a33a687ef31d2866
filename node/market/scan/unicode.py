"""Invisible and deceptive Unicode: what a reader cannot see but a model reads.

- Tag characters (U+E0000-U+E007F) spell ASCII invisibly ("ASCII smuggling"); they are
  allowed only in emoji tag sequences (a subdivision flag after U+1F3F4).
- Variation selectors after a character that takes none, and the supplementary ones
  (U+E0100-U+E01EF), can carry a byte each (variation-selector smuggling).
- Bidi overrides and isolates reorder what is shown against what is read (Trojan Source).
- Zero-width characters outside the places they belong (a joiner inside an emoji
  sequence, a non-joiner between letters of scripts that use it).
- Homoglyphs: a word mixing Latin with Cyrillic or Greek letters ("pаypal").

``fold`` maps a line to its skeleton (NFKC, look-alike letters to Latin, invisible
characters removed) so that the line rules see "Ignоre" as "ignore".
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

TAGS = range(0xE0000, 0xE0080)
VS_BASIC = range(0xFE00, 0xFE10)
VS_SUPPLEMENT = range(0xE0100, 0xE01F0)
BIDI_CONTROLS = frozenset({0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069})
BIDI_MARKS = frozenset({0x200E, 0x200F, 0x061C})
ZERO_WIDTH = frozenset({0x200B, 0x200C, 0x200D, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0xFEFF,
                        0x180E, 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0})
BLACK_FLAG = 0x1F3F4
# Scripts that write with joiners / non-joiners (Arabic, Persian, Indic, Sinhala...).
_JOINING_SCRIPTS = ("ARABIC", "DEVANAGARI", "BENGALI", "GURMUKHI", "GUJARATI", "ORIYA", "TAMIL",
                    "TELUGU", "KANNADA", "MALAYALAM", "SINHALA", "SYRIAC", "MONGOLIAN")
CONFUSABLES = str.maketrans({
    # Cyrillic
    "а": "a", "е": "e", "о": "o", "р": "p", "с": "c", "у": "y", "х": "x", "і": "i", "ј": "j",
    "ѕ": "s", "ԁ": "d", "һ": "h", "ӏ": "l", "ԛ": "q", "ԝ": "w", "ѵ": "v", "ь": "b",
    "А": "A", "В": "B", "Е": "E", "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C",
    "Т": "T", "Х": "X", "І": "I", "Ј": "J", "Ѕ": "S", "У": "Y",
    # Greek
    "α": "a", "ο": "o", "ρ": "p", "ν": "v", "ι": "i", "κ": "k", "υ": "u", "ϲ": "c",
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M", "Ν": "N",
    "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X",
})


def _is_emoji(char: str) -> bool:
    code = ord(char)
    return (0x1F000 <= code <= 0x1FAFF or 0x2600 <= code <= 0x27BF or 0x2B00 <= code <= 0x2BFF
            or code in (0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x3030, 0x303D)
            or 0x1F1E6 <= code <= 0x1F1FF)


def _script(char: str) -> str:
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else ""


@dataclass(frozen=True)
class UnicodeHit:
    rule: str
    column: int
    detail: str
    hidden: str = ""


def _decode_tags(line: str, start: int) -> tuple[str, int]:
    """ASCII spelled by the run of tag characters from ``start``; the index after it."""
    out = []
    index = start
    while index < len(line) and ord(line[index]) in TAGS:
        code = ord(line[index]) - 0xE0000
        out.append(chr(code) if 0x20 <= code < 0x7F else "")
        index += 1
    return "".join(out), index


def _decode_selectors(line: str, start: int) -> tuple[bytes, int]:
    out = bytearray()
    index = start
    while index < len(line):
        code = ord(line[index])
        if code in VS_BASIC:
            out.append(code - 0xFE00)
        elif code in VS_SUPPLEMENT:
            out.append(code - 0xE0100 + 16)
        else:
            break
        index += 1
    return bytes(out), index


def inspect(line: str) -> list[UnicodeHit]:
    """Every invisible or deceptive character run of ``line`` (one pass, no regex)."""
    hits: list[UnicodeHit] = []
    if line.isascii():
        return hits
    index = 0
    while index < len(line):
        char = line[index]
        code = ord(char)
        previous = line[index - 1] if index else ""
        if code in TAGS:
            hidden, after = _decode_tags(line, index)
            is_flag = previous and ord(previous) == BLACK_FLAG and after - index <= 8 \
                and ord(line[after - 1]) == 0xE007F
            if not is_flag:
                hits.append(UnicodeHit("unicode_tags", index, f"{after - index} tag characters", hidden))
            index = after
            continue
        if code in VS_BASIC or code in VS_SUPPLEMENT:
            data, after = _decode_selectors(line, index)
            legit = (after - index == 1 and code in (0xFE0E, 0xFE0F)) or (
                after - index == 1 and code in VS_BASIC and previous and not previous.isascii())
            if not legit:
                hidden = data.decode("utf-8", "replace") if after - index > 1 else ""
                hits.append(UnicodeHit("variation_selectors", index,
                                       f"{after - index} variation selectors", hidden))
            index = after
            continue
        if code in BIDI_CONTROLS:
            hits.append(UnicodeHit("bidi_control", index, f"U+{code:04X}"))
        elif code in ZERO_WIDTH and not (index == 0 and code == 0xFEFF):
            following = line[index + 1] if index + 1 < len(line) else ""
            emoji_join = code == 0x200D and previous and following and (
                _is_emoji(previous) or ord(previous) in (0xFE0F,)) and _is_emoji(following)
            script_join = code in (0x200C, 0x200D) and previous and following and \
                _script(previous) in _JOINING_SCRIPTS and _script(following) in _JOINING_SCRIPTS
            if not (emoji_join or script_join):
                hits.append(UnicodeHit("zero_width", index, f"U+{code:04X}"))
        index += 1
    return hits


def mixed_script_words(line: str) -> list[tuple[int, str]]:
    """(column, word) for each word that mixes Latin letters with Cyrillic or Greek ones."""
    found: list[tuple[int, str]] = []
    if line.isascii():
        return found
    start = -1
    scripts: set[str] = set()
    for index, char in enumerate(line + " "):
        if char.isalpha():
            if start == -1:
                start, scripts = index, set()
            if len(scripts) < 3:
                script = "LATIN" if char.isascii() else _script(char)
                if script in ("LATIN", "CYRILLIC", "GREEK"):
                    scripts.add(script)
        elif start != -1:
            if "LATIN" in scripts and len(scripts) > 1:
                found.append((start, line[start:index][:64]))
            start = -1
    return found


def fold(line: str) -> str:
    """The line's skeleton: NFKC, look-alikes to Latin, format characters removed."""
    if line.isascii():
        return line
    normal = unicodedata.normalize("NFKC", line).translate(CONFUSABLES)
    return "".join(char for char in normal if unicodedata.category(char) != "Cf"
                   and not (0xFE00 <= ord(char) <= 0xFE0F or 0xE0100 <= ord(char) <= 0xE01EF))
