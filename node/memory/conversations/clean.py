"""Text from a transcript or conversation made fit to store: terminal codes stripped, tool output shortened.

Real transcripts carry what a terminal showed: ANSI colour and cursor codes, OSC
hyperlinks and titles, carriage-return progress bars, stray C0/C1 controls. None of
it is refused (one U+001B in a test run's output must not cost the whole session):
escape sequences are removed whole, every other control but tab and newline goes,
a line redrawn after ``\\r`` keeps what the terminal last showed, and a lone
UTF-16 surrogate (a ``"\\ud800"`` escape decodes to one) becomes U+FFFD.
"""

from __future__ import annotations

import re

# CSI (colours, cursor moves: ESC [ params final), OSC (titles, hyperlinks: ESC ] ... BEL or ESC \),
# DCS/PM/APC strings, then any other two-byte escape (ESC plus one character).
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x1b[()*+][0-9A-Za-z]"
    r"|\x1b[\x20-\x7e]?"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # every C0/C1 control but tab, newline and CR
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*)+")
_TRAILING = re.compile(r"[ \t]+\n")


def strip_controls(text: str) -> str:
    """``text`` as a terminal would have shown it, without escape codes or control characters."""
    if text.isascii() and text.isprintable():
        return text  # the common case: nothing to do
    text = _SURROGATES.sub("\ufffd", text)
    text = _CONTROLS.sub("", _ESCAPES.sub("", text))
    if "\r" in text:
        text = "\n".join(_overwrite(line) for line in text.replace("\r\n", "\n").split("\n"))
    return text


def _overwrite(line: str) -> str:
    """A line redrawn after carriage returns, as the terminal left it (``"10%\\r100%"`` is ``"100%"``)."""
    shown = ""
    for segment in line.split("\r"):
        shown = segment + shown[len(segment):]
    return shown


def tidy(text: str) -> str:
    """Controls stripped, trailing blanks and runs of empty lines squeezed, ends trimmed."""
    text = strip_controls(text)
    text = _TRAILING.sub("\n", text)
    return _BLANK_RUNS.sub("\n", text).strip()


def shorten(text: str, limit: int, tail_share: float = 1 / 3) -> str:
    """At most about ``limit`` characters: the head and the tail, and how much was left out
    between them (the start of an output says what ran, its end how it ended)."""
    if len(text) <= limit:
        return text
    tail = int(limit * tail_share)
    head = limit - tail
    omitted = text[head:len(text) - tail]
    lines = omitted.count("\n")
    note = f" [… {len(omitted)} characters" + (f", {lines} lines" if lines else "") + " left out …] "
    return text[:head].rstrip() + note + text[len(text) - tail:].lstrip()
