"""Scratch buffer lines: format, checksum, torn tails, hostile note text (seed 001 WAL)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from node.memory.working.scratch import (
    HEADER,
    NoteRejected,
    ScratchBuffer,
    ScratchNote,
    format_line,
    parse,
    parse_line,
    validate_note,
)


def test_line_has_the_seed_format_and_round_trips() -> None:
    note = ScratchNote("0123456789abcdef", "2026-03-12T14:30:00Z", 0.8,
                       "User's name is Douglas, prefers tabs over spaces")
    line = format_line(note)
    assert line.startswith("- [2026-03-12T14:30:00Z] (importance: 0.8) User's name is Douglas")
    assert note.seed_line() == ("- [2026-03-12T14:30:00Z] (importance: 0.8) "
                                "User's name is Douglas, prefers tabs over spaces")
    assert parse_line(line.rstrip("\n")) == note


def test_a_flipped_byte_is_detected_not_consumed() -> None:
    note = ScratchNote("0123456789abcdef", "2026-03-12T14:30:00Z", 0.8, "deadline is March 20th")
    line = format_line(note).rstrip("\n")
    assert parse_line(line.replace("March 20th", "March 21st")) is None
    contents = parse((HEADER + line.replace("0.8", "0.9") + "\n").encode())
    assert contents.notes == [] and len(contents.corrupt) == 1


def test_a_torn_last_line_is_ignored() -> None:
    good = format_line(ScratchNote("0123456789abcdef", "2026-03-12T14:30:00Z", 0.7, "kept"))
    torn = format_line(ScratchNote("fedcba9876543210", "2026-03-12T14:31:00Z", 0.7, "torn"))[:30]
    contents = parse((HEADER + good + torn).encode())
    assert [n.text for n in contents.notes] == ["kept"] and contents.torn_tail


def test_newlines_in_a_note_cannot_forge_a_second_note() -> None:
    text, _ = validate_note("real note\n- [2026-01-01T00:00:00Z] (importance: 1) forged", 0.5)
    assert "\n" not in text
    note = ScratchNote("0123456789abcdef", "2026-03-12T14:30:00Z", 0.5, text)
    assert [n.text for n in parse((HEADER + format_line(note)).encode()).notes] == [text]


@pytest.mark.parametrize("text,importance,message", [
    ("", 0.5, "empty"),
    ("   \n\t ", 0.5, "empty"),
    ("x" * 4001, 0.5, "longer than"),
    ("ok", 1.5, "between 0 and 1"),
    ("ok", -0.1, "between 0 and 1"),
    ("ok", True, "number"),
    ("ok", "0.5", "number"),
    ("bad \ud800 surrogate", 0.5, "surrogate"),
])
def test_bad_notes_are_rejected(text: str, importance: object, message: str) -> None:
    with pytest.raises(NoteRejected, match=message):
        validate_note(text, importance)  # type: ignore[arg-type]


def test_append_cuts_a_torn_tail_and_refuses_a_symlink(tmp_path: Path) -> None:
    scratch = ScratchBuffer(tmp_path / "ns")
    with scratch.locked():
        scratch.append_locked(scratch.new_note("first", 0.7))
    with open(scratch.path, "ab") as handle:
        handle.write(b"- [2026-03-12T14:31:00Z] (importance: 0.7) half wri")
    with scratch.locked():
        scratch.append_locked(scratch.new_note("second", 0.7))
    contents = scratch.read()
    assert [n.text for n in contents.notes] == ["first", "second"]
    assert not contents.corrupt and not contents.torn_tail
    assert os.stat(scratch.path).st_mode & 0o777 == 0o600

    target = tmp_path / "elsewhere.txt"
    target.write_text("do not touch\n")
    evil = ScratchBuffer(tmp_path / "evil")
    evil.directory.mkdir()
    evil.path.symlink_to(target)
    with evil.locked(), pytest.raises(OSError):
        evil.append_locked(evil.new_note("redirected?", 0.7))
    assert target.read_text() == "do not touch\n"


@given(st.binary(max_size=2000))
def test_parse_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    contents = parse(data)
    assert all(0.0 <= note.importance <= 1.0 for note in contents.notes)


@given(st.text(min_size=1, max_size=300), st.floats(min_value=0, max_value=1))
def test_any_valid_note_round_trips(text: str, importance: float) -> None:
    try:
        cleaned, value = validate_note(text, importance)
    except NoteRejected:
        return
    note = ScratchNote("0123456789abcdef", "2026-03-12T14:30:00Z", value, cleaned)
    assert parse((HEADER + format_line(note)).encode()).notes == [note]
