"""Memory testaments: the signed bundle a node's knowledge is inherited through (seed 003).

A testament is a file, not a gossip message, but it is read by another node
and may be crafted, so it is specified here like any wire format. Canonical
CBOR map of exactly three keys::

    version (int, 1), body (map, below), signature (64 bytes)

``signature`` is the signer's Ed25519 signature over
``TESTAMENT_DOMAIN || cbor({version, body})``; ``body.signer`` is the signer's
32-byte public key. The body carries at most :data:`MAX_ENTRIES` entries — the
seed's genomic bottleneck ("successors inherit compressed knowledge (max 2048
entries), not raw experience"). Confidence travels as integer parts per
million; an entry's ``generation`` is 0 when the signer learned it itself and
n when the signer had inherited it n generations back.

:func:`open_testament` checks, in order: size, canonical CBOR (which bounds
nesting depth), exact key sets and types of every record, signature. Any
failure raises :class:`InvalidTestament`; nothing is returned half-parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from protocol.codec import CodecError, decode, encode
from protocol.identity import Identity, peer_id_from_public_key, verify
from protocol.schema import (
    PPM,
    PUBLIC_KEY,
    TIMESTAMP,
    Bytes,
    Int,
    InvalidMessage,
    ListOf,
    Nullable,
    Record,
    RecordField,
    Schema,
    Text,
)

__all__ = [
    "ENTRY_KINDS",
    "MAX_ENTRIES",
    "MAX_TESTAMENT_BYTES",
    "TESTAMENT_DOMAIN",
    "TESTAMENT_VERSION",
    "InvalidTestament",
    "Testament",
    "TestamentBody",
    "TestamentEntry",
    "open_testament",
    "seal_testament",
]

TESTAMENT_VERSION = 1
TESTAMENT_DOMAIN = b"crystalmesh/testament/v1\x00"
MAX_ENTRIES = 2048
"""Seed 003: the genomic bottleneck, "max 2048 entries"."""

MAX_TEXT_BYTES = 16 * 1024
MAX_SOURCES = 256
MAX_LINKS = 64
MAX_GENERATION = 1000
MAX_TESTAMENT_BYTES = MAX_ENTRIES * (MAX_TEXT_BYTES + 4 * 1024) // 4
"""Largest file accepted (10 MiB): room for 2,048 entries of about 4 KiB of text."""

ENTRY_KINDS = frozenset({"fact", "warning", "directive", "episode", "skill", "task_pattern"})
"""Kinds of entry; ``directive`` (what the user said) was added within version 1: a reader that
predates it refuses a testament carrying one, nothing is half-read."""
ID = Text(64, pattern=r"[0-9A-Za-z._:-]+")


class InvalidTestament(ValueError):
    """A testament is malformed, oversized, unsigned or signed by someone else's key."""


@dataclass(frozen=True)
class TestamentEntry(Record):
    __test__: ClassVar[bool] = False  # not a pytest class
    FIELDS: ClassVar[Schema] = {
        "id": ID,
        "kind": Text(16, choices=ENTRY_KINDS),
        "text": Text(MAX_TEXT_BYTES, max_utf8_bytes=MAX_TEXT_BYTES),
        "namespace": Nullable(Text(256)),
        "confidence_ppm": Int(0, PPM),
        "generation": Int(0, MAX_GENERATION),
        "episode_count": Int(0, 2**31),
        "source_episodes": ListOf(ID, MAX_SOURCES, unique=True),
        "links": ListOf(ID, MAX_LINKS, unique=True),
        "created_at_ms": TIMESTAMP,
    }
    id: str
    kind: str
    text: str
    namespace: str | None
    confidence_ppm: int
    generation: int
    episode_count: int
    source_episodes: tuple[str, ...]
    links: tuple[str, ...]
    created_at_ms: int


@dataclass(frozen=True)
class TestamentBody(Record):
    __test__: ClassVar[bool] = False  # not a pytest class
    FIELDS: ClassVar[Schema] = {
        "signer": PUBLIC_KEY,
        "issued_at_ms": TIMESTAMP,
        "entries": ListOf(RecordField(TestamentEntry), MAX_ENTRIES),
    }
    signer: bytes
    issued_at_ms: int
    entries: tuple[TestamentEntry, ...]

    def check(self) -> None:
        ids = [entry.id for entry in self.entries]
        if len(set(ids)) != len(ids):
            raise InvalidMessage("entries: duplicate ids")


@dataclass(frozen=True)
class Testament(Record):
    __test__: ClassVar[bool] = False  # not a pytest class
    FIELDS: ClassVar[Schema] = {
        "version": Int(TESTAMENT_VERSION, TESTAMENT_VERSION),
        "body": RecordField(TestamentBody),
        "signature": Bytes(64),
    }
    version: int
    body: TestamentBody
    signature: bytes

    @property
    def signer_peer_id(self) -> str:
        return peer_id_from_public_key(self.body.signer)

    def to_bytes(self) -> bytes:
        return encode(self.to_body())


def signing_bytes(body: TestamentBody, version: int = TESTAMENT_VERSION) -> bytes:
    """``TESTAMENT_DOMAIN || cbor({version, body})``."""
    return TESTAMENT_DOMAIN + encode({"version": version, "body": body.to_body()})


def seal_testament(identity: Identity, entries: list[TestamentEntry], issued_at_ms: int) -> bytes:
    """Sign ``entries`` with ``identity``; returns the file's bytes."""
    if len(entries) > MAX_ENTRIES:
        raise InvalidTestament(f"{len(entries)} entries > {MAX_ENTRIES}")
    try:
        body = TestamentBody(identity.public_key, issued_at_ms, tuple(entries))
    except InvalidMessage as error:
        raise InvalidTestament(str(error)) from error
    testament = Testament(TESTAMENT_VERSION, body, identity.sign(signing_bytes(body)))
    data = testament.to_bytes()
    if len(data) > MAX_TESTAMENT_BYTES:
        raise InvalidTestament(f"{len(data)} bytes > {MAX_TESTAMENT_BYTES}")
    return data


def open_testament(data: bytes, max_size: int = MAX_TESTAMENT_BYTES) -> Testament:
    """Parse and verify a testament file; raises :class:`InvalidTestament` for anything off-spec."""
    try:
        decoded: Any = decode(data, max_size=max_size)
        testament = Testament.from_body(decoded, path="testament")
    except (CodecError, InvalidMessage, RecursionError) as error:
        raise InvalidTestament(str(error)) from error
    if not verify(testament.body.signer, signing_bytes(testament.body), testament.signature):
        raise InvalidTestament("bad signature")
    return testament
