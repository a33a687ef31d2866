"""The backup archive's stream (node/ops/archive.py): whatever is changed, dropped, moved or
appended, or unlocked with another passphrase, is refused; what was written reads back."""

from __future__ import annotations

import io
import struct

import pytest

from node.ops.archive import (
    CHUNK_BYTES,
    HEADER_BYTES,
    MAGIC,
    BackupRefused,
    EncryptingWriter,
    decrypt,
)

PASSPHRASE = b"correct horse battery staple"
PLAIN = bytes(range(256)) * (CHUNK_BYTES * 2 // 256) + b"tail"  # three chunks, the last one short


@pytest.fixture(scope="module")
def sealed() -> bytes:
    out = io.BytesIO()
    writer = EncryptingWriter(out, PASSPHRASE)
    for start in range(0, len(PLAIN), 100_000):
        writer.write(PLAIN[start:start + 100_000])
    writer.close()
    return out.getvalue()


def chunks(data: bytes) -> tuple[bytes, list[bytes]]:
    """The header and each (length + ciphertext) chunk of an archive."""
    header, rest, parts = data[:HEADER_BYTES], data[HEADER_BYTES:], []
    while rest:
        (length,) = struct.unpack(">I", rest[:4])
        parts.append(rest[:4 + length])
        rest = rest[4 + length:]
    return header, parts


def read(data: bytes, passphrase: bytes = PASSPHRASE) -> bytes:
    return b"".join(decrypt(io.BytesIO(data), passphrase))


def test_round_trip(sealed: bytes) -> None:
    assert read(sealed) == PLAIN
    assert len(chunks(sealed)[1]) == 3
    assert PLAIN[:64] not in sealed


def test_final_chunk_dropped_at_a_chunk_boundary_is_refused(sealed: bytes) -> None:
    header, parts = chunks(sealed)
    with pytest.raises(BackupRefused, match="truncated"):
        read(header + b"".join(parts[:-1]))


def test_chunks_moved_or_replayed_are_refused(sealed: bytes) -> None:
    header, parts = chunks(sealed)
    for reordered in ([parts[1], parts[0], parts[2]], [parts[0], parts[0], parts[1], parts[2]]):
        with pytest.raises(BackupRefused, match="altered"):
            read(header + b"".join(reordered))


def test_wrong_passphrase_and_altered_header_are_refused(sealed: bytes) -> None:
    with pytest.raises(BackupRefused, match="wrong passphrase"):
        read(sealed, PASSPHRASE + b"!")
    salt_at = len(MAGIC) + 12
    with pytest.raises(BackupRefused, match="altered"):
        read(sealed[:salt_at] + bytes([sealed[salt_at] ^ 1]) + sealed[salt_at + 1:])


def test_hostile_kdf_parameters_are_refused_before_any_work(sealed: bytes) -> None:
    huge_memory = sealed[:len(MAGIC)] + struct.pack(">IQ", 2, 1 << 40) + sealed[len(MAGIC) + 12:]
    with pytest.raises(BackupRefused, match="out of bounds"):
        read(huge_memory)


def test_empty_passphrase_is_refused() -> None:
    with pytest.raises(BackupRefused, match="empty passphrase"):
        EncryptingWriter(io.BytesIO(), b"")
