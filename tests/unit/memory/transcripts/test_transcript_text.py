"""Reading transcript files as complete lines in bounded memory, terminal codes stripped, output
shortened, and secrets redacted so that what remains classifies clean (node.memory.transcripts.lines,
.clean; node.crystals.governance.redact_secrets)."""

from __future__ import annotations

import io

import pytest

from node.crystals.governance import redact_secrets, sensitive_classes
from node.memory.conversations.clean import shorten, strip_controls
from node.memory.transcripts.lines import chunks, fingerprint, read_lines


def test_complete_lines_only_from_an_offset() -> None:
    data = b'{"a": 1}\n{"b": 2}\n{"c": 3'
    lines = list(read_lines(io.BytesIO(data), 0, block_bytes=3))
    assert [(line.start, line.end, line.data) for line in lines] == [(0, 9, b'{"a": 1}\n'), (9, 18, b'{"b": 2}\n')]
    assert [line.data for line in read_lines(io.BytesIO(data), 9)] == [b'{"b": 2}\n']
    assert list(read_lines(io.BytesIO(data), 0, limit=12)) == [lines[0]]  # bytes past the limit wait


def test_an_over_long_line_is_passed_over_without_being_held() -> None:
    data = b"short\n" + b"x" * 1000 + b"\nafter\n"
    lines = list(read_lines(io.BytesIO(data), 0, max_line_bytes=100, block_bytes=16))
    assert [(line.start, line.end, line.data) for line in lines] == [
        (0, 6, b"short\n"), (6, 1007, None), (1007, 1013, b"after\n")]
    pieces = list(chunks(io.BytesIO(data), 0, chunk_bytes=200, max_line_bytes=100))
    assert [(piece.offset, piece.data, piece.end_offset) for piece in pieces] == [
        (0, b"short\n", 1007), (1007, b"after\n", 1013)]


def test_chunks_hold_whole_lines_up_to_the_size() -> None:
    data = b"".join(b"%05d\n" % number for number in range(100))  # 600 bytes
    pieces = list(chunks(io.BytesIO(data), 0, chunk_bytes=250, max_line_bytes=20))
    assert [len(piece.data) for piece in pieces] == [246, 246, 108]
    assert b"".join(piece.data for piece in pieces) == data
    assert all(piece.end_offset == piece.offset + len(piece.data) for piece in pieces)
    with pytest.raises(ValueError):
        list(chunks(io.BytesIO(data), 0, chunk_bytes=10, max_line_bytes=20))


def test_the_fingerprint_is_the_first_line() -> None:
    assert fingerprint(io.BytesIO(b"first\nsecond\n")) == fingerprint(io.BytesIO(b"first\nother\nmore\n"))
    assert fingerprint(io.BytesIO(b"first\n")) != fingerprint(io.BytesIO(b"First\n"))


@pytest.mark.parametrize("text, shown", [
    ("\x1b[1;31mFAILED\x1b[0m test_x", "FAILED test_x"),
    ("\x1b]8;;https://example.org\x07link\x1b]8;;\x07", "link"),
    ("\x1b]0;title\x1b\\prompt", "prompt"),
    ("\x1b(Bplain", "plain"),
    ("10%\r50%\r100%\ndone", "100%\ndone"),
    ("line\r\nnext", "line\nnext"),
    ("bell\x07 nul\x00 del\x7f c1\x9b2J", "bell nul del c1"),
    ("tab\tand\nnewline", "tab\tand\nnewline"),
    ("lone \ud800 surrogate", "lone \ufffd surrogate"),
])
def test_terminal_codes_are_stripped(text: str, shown: str) -> None:
    assert strip_controls(text) == shown


def test_shorten_keeps_head_and_tail() -> None:
    text = "\n".join(f"line {number}" for number in range(1000))
    short = shorten(text, 300)
    assert short.startswith("line 0\nline 1") and short.endswith("line 999")
    assert "lines left out" in short and len(short) < 360
    assert shorten("brief", 300) == "brief"


@pytest.mark.parametrize("text, counts, kept", [
    ("OPENAI_API_KEY=sk-proj-Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7x\nDEBUG=1", {"api_key": 1}, "OPENAI_API_KEY="),
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", {"api_key": 1}, "AWS_ACCESS_KEY_ID="),
    ("DATABASE_URL=postgres://app:s3cretPass@db:5432/app", {"connection_string": 1}, "postgres://app:"),
    ("Server=db;Password=abc123;Trusted=no", {"connection_string": 1}, "Server=db;Password="),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\nnext",
     {"private_key": 1}, "\nnext"),
    ("the password for staging is Hunter2!", {"password": 1}, "the password for staging is "),
    ("my password is correct horse", {"secret": 1}, "my password is "),
    ("SECRET_KEY=Zx8f9Qw2Lm4Np7Rt1Vb3Kc6", {"secret": 1}, "SECRET_KEY="),
    ('password = "hunter22"', {"secret": 1}, 'password = "'),
    ("the token bucket rate limiter", {}, "the token bucket rate limiter"),
    ("write to jonas@example.com", {}, "jonas@example.com"),  # personal: kept, classified as today
])
def test_redaction_removes_every_secret_and_counts_it(text: str, counts: dict[str, int], kept: str) -> None:
    redacted, found = redact_secrets(text)
    assert found == counts and kept in redacted
    confidential = {"private_key", "jwt", "connection_string", "seed_phrase", "password", "api_key", "secret"}
    assert not confidential & set(sensitive_classes(redacted))
