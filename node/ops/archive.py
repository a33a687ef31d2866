"""The encrypted backup archive: a passphrase, Argon2id, and libsodium's secretstream.

Layout (integers big-endian)::

    b"CMBACKUP1\\n"                         magic and format version
    opslimit u32, memlimit u64, salt 16 B   Argon2id parameters (the key is derived from the passphrase)
    secretstream header 24 B
    chunks: length u32 + ciphertext         XChaCha20-Poly1305 secretstream, one chunk per 1 MiB

The key is ``argon2id(passphrase, salt)`` (PyNaCl, libsodium). The chunks are
libsodium's ``crypto_secretstream_xchacha20poly1305``: each is authenticated,
their order is part of the state (a chunk moved, dropped or replayed fails), the
last one carries ``TAG_FINAL`` (a truncated file has none), and every chunk takes
the file's whole header as additional data (a changed parameter fails the first
chunk). Anything after the final chunk is refused. A wrong passphrase and an
altered file look the same to a reader, and are reported as one error.

The reader treats the file as hostile: the KDF parameters are bounded (a header
cannot make it allocate gigabytes), so are chunk lengths.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import BinaryIO

from nacl import bindings, pwhash
from nacl.exceptions import CryptoError

from node.errors import CrystalmeshError

MAGIC = b"CMBACKUP1\n"
CHUNK_BYTES = 1 << 20
SALT_BYTES = pwhash.argon2id.SALTBYTES
OPSLIMIT = pwhash.argon2id.OPSLIMIT_INTERACTIVE
MEMLIMIT = pwhash.argon2id.MEMLIMIT_INTERACTIVE
# What a reader accepts from a header: libsodium's "sensitive" preset is the ceiling.
MAX_OPSLIMIT = pwhash.argon2id.OPSLIMIT_SENSITIVE
MAX_MEMLIMIT = pwhash.argon2id.MEMLIMIT_SENSITIVE
_PARAMS = struct.Struct(">IQ")
HEADER_BYTES = len(MAGIC) + _PARAMS.size + SALT_BYTES + bindings.crypto_secretstream_xchacha20poly1305_HEADERBYTES
_ABYTES = bindings.crypto_secretstream_xchacha20poly1305_ABYTES
_TAG_MESSAGE = bindings.crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
_TAG_FINAL = bindings.crypto_secretstream_xchacha20poly1305_TAG_FINAL


class BackupRefused(CrystalmeshError, ValueError):
    """A backup file that cannot be read back exactly as written: nothing is restored."""


def _key(passphrase: bytes, salt: bytes, opslimit: int, memlimit: int) -> bytes:
    if not passphrase:
        raise BackupRefused("an empty passphrase protects nothing")
    key: bytes = pwhash.argon2id.kdf(bindings.crypto_secretstream_xchacha20poly1305_KEYBYTES,
                                     passphrase, salt, opslimit=opslimit, memlimit=memlimit)
    return key


class EncryptingWriter:
    """A write-only file object: what is written goes to ``out`` encrypted, chunk by chunk."""

    def __init__(self, out: BinaryIO, passphrase: bytes, *, opslimit: int = OPSLIMIT,
                 memlimit: int = MEMLIMIT) -> None:
        self._out = out
        salt = os.urandom(SALT_BYTES)
        key = _key(passphrase, salt, opslimit, memlimit)
        self._state = bindings.crypto_secretstream_xchacha20poly1305_state()
        stream_header = bindings.crypto_secretstream_xchacha20poly1305_init_push(self._state, key)
        self._header = MAGIC + _PARAMS.pack(opslimit, memlimit) + salt + stream_header
        out.write(self._header)
        self._buffer = bytearray()
        self.plaintext_bytes = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        self._buffer += data
        self.plaintext_bytes += len(data)
        while len(self._buffer) >= CHUNK_BYTES:
            self._push(bytes(self._buffer[:CHUNK_BYTES]), _TAG_MESSAGE)
            del self._buffer[:CHUNK_BYTES]
        return len(data)

    def _push(self, chunk: bytes, tag: int) -> None:
        sealed = bindings.crypto_secretstream_xchacha20poly1305_push(self._state, chunk, self._header, tag)
        self._out.write(struct.pack(">I", len(sealed)) + sealed)

    def close(self) -> None:
        """Write the final chunk (``TAG_FINAL``); without it a reader refuses the file."""
        if not self.closed:
            self._push(bytes(self._buffer), _TAG_FINAL)
            self._buffer.clear()
            self.closed = True


def decrypt(source: BinaryIO, passphrase: bytes, name: str = "backup") -> Iterator[bytes]:
    """The plaintext of an archive, chunk by chunk; raises :class:`BackupRefused` at the first
    chunk that does not authenticate, on a missing final chunk, or on bytes after it."""
    header = source.read(HEADER_BYTES)
    if len(header) < HEADER_BYTES or not header.startswith(MAGIC):
        raise BackupRefused(f"{name} is not a crystalmesh backup (bad header)")
    opslimit, memlimit = _PARAMS.unpack_from(header, len(MAGIC))
    if not (1 <= opslimit <= MAX_OPSLIMIT and 8192 <= memlimit <= MAX_MEMLIMIT):
        raise BackupRefused(f"{name}: key derivation parameters out of bounds (the header was altered)")
    salt = header[len(MAGIC) + _PARAMS.size:len(MAGIC) + _PARAMS.size + SALT_BYTES]
    key = _key(passphrase, salt, opslimit, memlimit)
    state = bindings.crypto_secretstream_xchacha20poly1305_state()
    bindings.crypto_secretstream_xchacha20poly1305_init_pull(state, header[-24:], key)
    refused = f"cannot decrypt {name}: wrong passphrase, or the file was altered"
    while True:
        length_bytes = source.read(4)
        if len(length_bytes) < 4:
            raise BackupRefused(f"{name} is truncated (it ends before its final chunk)")
        (length,) = struct.unpack(">I", length_bytes)
        if not _ABYTES <= length <= CHUNK_BYTES + _ABYTES:
            raise BackupRefused(refused)
        sealed = source.read(length)
        if len(sealed) < length:
            raise BackupRefused(f"{name} is truncated (it ends inside a chunk)")
        try:
            chunk, tag = bindings.crypto_secretstream_xchacha20poly1305_pull(state, sealed, header)
        except CryptoError as exc:
            raise BackupRefused(refused) from exc
        yield chunk
        if tag == _TAG_FINAL:
            if source.read(1):
                raise BackupRefused(f"{name} has bytes after its final chunk (the file was altered)")
            return
