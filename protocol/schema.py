"""Declarative wire schemas for message bodies.

Each message is a frozen dataclass listing its wire fields once, in
``FIELDS``: wire key -> validator. The validators both *parse* a decoded CBOR
value (checking type, range and length, and converting lists to tuples and
nested maps to records) and *dump* the Python value back to its wire form.
Construction validates too, so an invalid message cannot be built, signed or
sent; receiving code sees :class:`InvalidMessage` for anything off-spec.

Integers never accept ``bool`` (``True`` is an ``int`` in Python but a
distinct CBOR simple value on the wire).
"""

from __future__ import annotations

import dataclasses
import hashlib
import keyword
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self

__all__ = [
    "CHAIN_ID",
    "COUNT",
    "EVM_ADDRESS",
    "MAX_LISTING_LIFETIME_MS",
    "MAX_PRICE_MICRO_USDC",
    "PPM",
    "PUBLIC_KEY",
    "REQUEST_ID",
    "SHA256_HEX",
    "TIMESTAMP",
    "TX_HASH",
    "U63_MAX",
    "U64_MAX",
    "Blob",
    "Bool",
    "Bytes",
    "Field",
    "Int",
    "InvalidMessage",
    "ListOf",
    "Message",
    "Nullable",
    "Record",
    "RecordField",
    "Schema",
    "Text",
    "Tuple",
    "sha256_hex",
]

U64_MAX = 2**64 - 1
"""Largest unsigned integer the codec carries."""

U63_MAX = 2**63 - 1
"""Bound for timestamps and ids, so they also fit a signed 64-bit column."""

MAX_PRICE_MICRO_USDC = 10**12
"""Largest price or payment on the wire: one million USDC, in micro-USDC."""

MAX_LISTING_LIFETIME_MS = 7 * 24 * 3600 * 1000
"""A listing may not claim to live longer than a week past its issue time."""

PPM = 1_000_000
"""One, in parts per million: fractions travel as integers."""


class InvalidMessage(ValueError):
    """A message body does not match its schema (wrong keys, types, ranges or lengths)."""


class Field:
    """A validator for one wire value. Subclasses implement ``parse`` and ``dump``."""

    def parse(self, value: Any, path: str) -> Any:
        raise NotImplementedError

    def dump(self, value: Any) -> Any:
        return value


class Int(Field):
    def __init__(self, minimum: int = 0, maximum: int = U64_MAX) -> None:
        self.minimum = minimum
        self.maximum = maximum

    def parse(self, value: Any, path: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidMessage(f"{path}: expected int, got {type(value).__name__}")
        if not self.minimum <= value <= self.maximum:
            raise InvalidMessage(f"{path}: {value} outside [{self.minimum}, {self.maximum}]")
        return int(value)


class Bool(Field):
    def parse(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise InvalidMessage(f"{path}: expected bool, got {type(value).__name__}")
        return value


class Bytes(Field):
    def __init__(self, length: int) -> None:
        self.length = length

    def parse(self, value: Any, path: str) -> bytes:
        if not isinstance(value, bytes):
            raise InvalidMessage(f"{path}: expected bytes, got {type(value).__name__}")
        if len(value) != self.length:
            raise InvalidMessage(f"{path}: expected {self.length} bytes, got {len(value)}")
        return value


class Blob(Field):
    """Bytes of any length up to ``max_bytes`` (at least ``min_bytes``)."""

    def __init__(self, max_bytes: int, min_bytes: int = 1) -> None:
        self.max_bytes = max_bytes
        self.min_bytes = min_bytes

    def parse(self, value: Any, path: str) -> bytes:
        if not isinstance(value, bytes):
            raise InvalidMessage(f"{path}: expected bytes, got {type(value).__name__}")
        if not self.min_bytes <= len(value) <= self.max_bytes:
            raise InvalidMessage(
                f"{path}: {len(value)} bytes outside [{self.min_bytes}, {self.max_bytes}]"
            )
        return value


class Text(Field):
    """A UTF-8 string bounded in characters (and optionally in encoded bytes)."""

    def __init__(
        self,
        max_chars: int,
        *,
        min_chars: int = 1,
        pattern: str | None = None,
        choices: frozenset[str] | None = None,
        max_utf8_bytes: int | None = None,
    ) -> None:
        self.max_chars = max_chars
        self.min_chars = min_chars
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.choices = choices
        self.max_utf8_bytes = max_utf8_bytes

    def parse(self, value: Any, path: str) -> str:
        if not isinstance(value, str):
            raise InvalidMessage(f"{path}: expected str, got {type(value).__name__}")
        if not self.min_chars <= len(value) <= self.max_chars:
            raise InvalidMessage(
                f"{path}: length {len(value)} outside [{self.min_chars}, {self.max_chars}]"
            )
        if self.max_utf8_bytes is not None:
            try:
                size = len(value.encode("utf-8"))
            except UnicodeEncodeError as error:
                raise InvalidMessage(f"{path}: not encodable as UTF-8") from error
            if size > self.max_utf8_bytes:
                raise InvalidMessage(f"{path}: {size} UTF-8 bytes > {self.max_utf8_bytes}")
        if self.pattern is not None and not self.pattern.fullmatch(value):
            raise InvalidMessage(f"{path}: does not match {self.pattern.pattern}")
        if self.choices is not None and value not in self.choices:
            raise InvalidMessage(f"{path}: {value!r} not one of {sorted(self.choices)}")
        return value


class Nullable(Field):
    """``None`` or a value accepted by ``inner``."""

    def __init__(self, inner: Field) -> None:
        self.inner = inner

    def parse(self, value: Any, path: str) -> Any:
        return None if value is None else self.inner.parse(value, path)

    def dump(self, value: Any) -> Any:
        return None if value is None else self.inner.dump(value)


class ListOf(Field):
    """A CBOR array of at most ``max_items`` items, held as a tuple in Python."""

    def __init__(self, inner: Field, max_items: int, *, unique: bool = False) -> None:
        self.inner = inner
        self.max_items = max_items
        self.unique = unique

    def parse(self, value: Any, path: str) -> tuple[Any, ...]:
        if not isinstance(value, list | tuple):
            raise InvalidMessage(f"{path}: expected list, got {type(value).__name__}")
        if len(value) > self.max_items:
            raise InvalidMessage(f"{path}: {len(value)} items > {self.max_items}")
        items = tuple(self.inner.parse(item, f"{path}[{i}]") for i, item in enumerate(value))
        if self.unique and len(set(items)) != len(items):
            raise InvalidMessage(f"{path}: duplicate items")
        return items

    def dump(self, value: Any) -> list[Any]:
        if not isinstance(value, list | tuple):
            raise InvalidMessage(f"expected a list or tuple, got {type(value).__name__}")
        return [self.inner.dump(item) for item in value]


class Tuple(Field):
    """A fixed-length CBOR array of heterogeneous items, e.g. ``[peer, weight_ppm]``."""

    def __init__(self, *items: Field, factory: Callable[..., Any] = tuple) -> None:
        self.items = items
        self.factory = factory

    def parse(self, value: Any, path: str) -> Any:
        if not isinstance(value, list | tuple) or len(value) != len(self.items):
            raise InvalidMessage(f"{path}: expected a list of {len(self.items)} items")
        parsed = [
            item.parse(element, f"{path}[{index}]")
            for index, (item, element) in enumerate(zip(self.items, value, strict=True))
        ]
        return self.factory(*parsed)

    def dump(self, value: Any) -> list[Any]:
        if not isinstance(value, list | tuple):
            raise InvalidMessage(f"expected a list or tuple, got {type(value).__name__}")
        return [item.dump(element) for item, element in zip(self.items, value, strict=True)]


class RecordField(Field):
    """A nested CBOR map described by another :class:`Record`."""

    def __init__(self, record: type[Record]) -> None:
        self.record = record

    def parse(self, value: Any, path: str) -> Record:
        if isinstance(value, self.record):
            return value
        return self.record.from_body(value, path=path)

    def dump(self, value: Any) -> dict[str, Any]:
        if not isinstance(value, self.record):
            raise InvalidMessage(f"expected {self.record.__name__}, got {type(value).__name__}")
        return value.to_body()


Schema = Mapping[str, Field]
"""A record's wire fields in specification order: wire key -> validator."""


def attribute_name(wire_key: str) -> str:
    """Python attribute for a wire key: ``from`` becomes ``from_``."""
    return wire_key + "_" if keyword.iskeyword(wire_key) else wire_key


@dataclasses.dataclass(frozen=True)
class Record:
    """Base of every wire map. Subclasses are frozen dataclasses with ``FIELDS``."""

    FIELDS: ClassVar[Schema] = {}

    def __post_init__(self) -> None:
        for wire_key, validator in self.FIELDS.items():
            attribute = attribute_name(wire_key)
            value = getattr(self, attribute)
            try:
                normalised = validator.parse(validator.dump(value), wire_key)
            except InvalidMessage:
                raise
            except (TypeError, AttributeError, ValueError) as error:
                raise InvalidMessage(f"{wire_key}: {error}") from error
            object.__setattr__(self, attribute, normalised)
        self.check()

    def check(self) -> None:
        """Cross-field rules; override and raise :class:`InvalidMessage`."""

    def to_body(self) -> dict[str, Any]:
        """The wire map (ready for :func:`protocol.codec.encode`)."""
        return {
            wire_key: validator.dump(getattr(self, attribute_name(wire_key)))
            for wire_key, validator in self.FIELDS.items()
        }

    @classmethod
    def from_body(cls, body: Any, path: str = "body") -> Self:
        """Parse and strictly validate a decoded wire map (exact key set)."""
        if not isinstance(body, dict):
            raise InvalidMessage(f"{path}: expected a map, got {type(body).__name__}")
        expected = set(cls.FIELDS)
        keys = set(body)
        if keys != expected:
            missing = sorted(expected - keys)
            unknown = sorted(str(key) for key in keys - expected)
            raise InvalidMessage(f"{path}: missing keys {missing}, unknown keys {unknown}")
        values = {
            attribute_name(wire_key): validator.parse(body[wire_key], f"{path}.{wire_key}")
            for wire_key, validator in cls.FIELDS.items()
        }
        return cls(**values)


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256, the form of every ``content_hash`` and ``listing_id``."""
    return hashlib.sha256(data).hexdigest()


# Common wire types, shared by all messages.
SHA256_HEX = Text(64, min_chars=64, pattern=r"[0-9a-f]{64}")
EVM_ADDRESS = Text(42, min_chars=42, pattern=r"0x[0-9a-fA-F]{40}")
TX_HASH = Text(66, min_chars=66, pattern=r"0x[0-9a-f]{64}")
REQUEST_ID = Text(32, min_chars=32, pattern=r"[0-9a-f]{32}")
PUBLIC_KEY = Bytes(32)
TIMESTAMP = Int(0, U63_MAX)
CHAIN_ID = Int(1, U63_MAX)
COUNT = Int(0, 2**40)


@dataclasses.dataclass(frozen=True)
class Message(Record):
    """A top-level message: the body of an envelope, identified by ``(KIND, VERSION)``."""

    KIND: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        """Rules that tie the body to its envelope; override and raise InvalidMessage."""
